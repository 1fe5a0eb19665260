"""WSGI entry point (gunicorn webapp.wsgi): Django's application behind the request-body limits
(webapp/bodylimit.py)."""
import os

# Files the app writes (database, uploads, logs) are its own alone, whatever umask the server was started with.
os.umask(0o077)

from django.core.wsgi import get_wsgi_application  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
django_application = get_wsgi_application()

from django.conf import settings  # noqa: E402

from webapp.bodylimit import BodyLimit  # noqa: E402

application = BodyLimit(django_application, anonymous=settings.SEEDBED_MAX_ANON_BODY_BYTES,
                        authenticated=settings.SEEDBED_MAX_BODY_BYTES, session_cookie=settings.SESSION_COOKIE_NAME,
                        spool_dir=str(settings.FILE_UPLOAD_TEMP_DIR))
