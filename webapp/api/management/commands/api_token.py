"""Print a new API token for a user (for /api/v1/ and `python -m seedbed_client`)."""
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from webapp.api.services import token_create


class Command(BaseCommand):
    help = "Make a new API token for USERNAME and print it (it is shown once; revoke it on the API tokens page)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="What the token is for (shown on the tokens page).")

    def handle(self, *args, username: str, name: str, **options):
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"username: no active user {username!r}")
        _, token = token_create(user=user, name=name or "manage.py api_token")
        self.stdout.write(token)
