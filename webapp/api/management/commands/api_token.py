"""Print a new API token for a user (for /api/v1/ and `python -m seedbed_client`)."""
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError
from django.http import Http404

from training.fields import FieldErrors
from webapp.api.models import ApiToken
from webapp.api.services import DEFAULT_EXPIRY_DAYS, MAX_EXPIRY_DAYS, parse_expiry_days, token_create


class Command(BaseCommand):
    help = "Make a new API token for USERNAME and print it (it is shown once; revoke it on the API tokens page)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="What the token is for (shown on the tokens page).")
        parser.add_argument("--scope", default=None, choices=ApiToken.Scope.values,
                            help="read: GET only; read-write (the default): everything the user may do; run: "
                                 "one run (--run) only, its metrics and samples appended and the run read.")
        parser.add_argument("--run", default=None, metavar="ID",
                            help="The run a token of scope run logs to (implies --scope run); the user must be a "
                                 "member of its project.")
        parser.add_argument("--expires-days", default=str(DEFAULT_EXPIRY_DAYS),
                            help=f"Days until it stops working, 1 to {MAX_EXPIRY_DAYS} (default "
                                 f"{DEFAULT_EXPIRY_DAYS}), or 'never' (the operator's choice, for any user).")

    def handle(self, *args, username: str, name: str, scope: str | None, expires_days: str, run: str | None,
               **options):
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"username: no active user {username!r}")
        try:
            scope = scope or (ApiToken.Scope.RUN if run is not None else ApiToken.Scope.READ_WRITE)
            _, token = token_create(user=user, name=name or "manage.py api_token", scope=scope,
                                    expires_days=parse_expiry_days(expires_days), allow_never=True, run=run)
        except FieldErrors as exc:
            raise CommandError(str(exc)) from None
        except (Http404, PermissionDenied) as exc:
            raise CommandError(f"run: {username} may not log to run {run}: {exc}") from None
        self.stdout.write(token)
