"""Settings of the adopt_new_keys example: one database, from DATABASE_URL."""

import os
from urllib.parse import urlsplit

url = urlsplit(os.environ["DATABASE_URL"])  # postgresql://user@host:port/name
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": url.path.lstrip("/"),
        "USER": url.username,
        "HOST": url.hostname,
        "PORT": url.port,
    }
}
INSTALLED_APPS = ["shop"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"  # Django's default for new projects
USE_TZ = True
SECRET_KEY = "only an example"
