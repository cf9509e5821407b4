"""Settings of the Django example: its three databases come from the URLs scripts/test/clients gives."""

import os
from urllib.parse import urlsplit


def database(variable):
    url = urlsplit(os.environ[variable])  # postgresql://user@host:port/name
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": url.path.lstrip("/"),
        "USER": url.username,
        "HOST": url.hostname,
        "PORT": url.port,
    }


DATABASES = {
    "default": database("DATABASE_URL"),
    "node_unset": database("NODE_UNSET_URL"),
    "not_preloaded": database("NOT_PRELOADED_URL"),
}
INSTALLED_APPS = ["orders"]
USE_TZ = True
SECRET_KEY = "only an example"
