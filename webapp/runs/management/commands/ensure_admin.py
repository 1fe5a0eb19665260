"""Create the admin account once, with a generated password printed and kept in $SEEDBED_HOME."""
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the 'admin' superuser if missing (password generated, printed, stored in var/admin_password)."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    def handle(self, *args, username: str, **options):
        path = settings.SEEDBED_HOME / "admin_password"
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None or not path.exists():
            password = secrets.token_urlsafe(12)
            if user is None:
                User.objects.create_superuser(username=username, email="", password=password)
            else:  # the stored password was removed: set a new one so it can be printed again
                user.set_password(password)
                user.save(update_fields=["password"])
            path.write_text(password + "\n")
            path.chmod(0o600)
        password = path.read_text().strip()
        self.stdout.write(f"admin account: user {username!r}, password {password!r} (stored in {path})")
