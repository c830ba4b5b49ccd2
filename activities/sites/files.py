"""A site's files: its directory tree under the sites root, and the database password kept beside it.

The password never enters workflow history. The filesystem and database steps run in parallel and both
need it, so the first to ask creates it, atomically, in a private credentials directory.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import uuid
from pathlib import Path

SITE_DIRECTORIES = (
    "wp-admin",
    "wp-includes",
    "wp-content/themes",
    "wp-content/plugins",
    "wp-content/uploads",
    "wp-content/languages",
    "wp-content/upgrade",
)
CREDENTIALS_DIR = ".credentials"


def site_key(site_id: str) -> str:
    """The site id's 32 hex digits: the only thing, never user input, that names its files and database."""
    return uuid.UUID(site_id).hex


def site_directory(sites_root: Path, site_id: str) -> Path:
    return sites_root / site_key(site_id)


def _credentials_file(sites_root: Path, site_id: str) -> Path:
    return sites_root / CREDENTIALS_DIR / site_key(site_id)


def site_password(sites_root: Path, site_id: str, *, writer: str) -> str:
    """The site's database password: read it, or create it if nobody has yet (first writer wins).

    `writer` names the caller (a step): its candidate file's name, one per writer, so that an attempt killed
    between writing its candidate and removing it leaves nothing its next attempt does not remove.
    """
    path = _credentials_file(sites_root, site_id)
    candidate = path.with_name(f"{path.name}.{writer}.tmp")
    candidate.unlink(missing_ok=True)
    if path.is_file():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _write_private(candidate, secrets.token_urlsafe(24))
    try:
        # link() fails if the name exists, so two racing steps agree on one password.
        os.link(candidate, path)
    except FileExistsError:
        pass
    finally:
        candidate.unlink()
    return path.read_text().strip()


def _write_private(path: Path, text: str) -> None:
    """A new file readable by its owner only from the moment it exists: never written first and restricted after."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(text)
    except BaseException:
        # A disk that filled up mid-write leaves no half secret behind.
        path.unlink(missing_ok=True)
        raise


def forget_site_password(sites_root: Path, site_id: str) -> None:
    path = _credentials_file(sites_root, site_id)
    for candidate in path.parent.glob(f"{path.name}.*.tmp"):
        candidate.unlink(missing_ok=True)
    path.unlink(missing_ok=True)


def _wp_config(database: str, password: str, host: str, port: int) -> str:
    salts = "\n".join(
        f"define('{name}', '{secrets.token_hex(32)}');"
        for name in ("AUTH_KEY", "SECURE_AUTH_KEY", "LOGGED_IN_KEY", "NONCE_KEY")
    )
    return (
        "<?php\n"
        f"define('DB_NAME', '{database}');\n"
        f"define('DB_USER', '{database}');\n"
        f"define('DB_PASSWORD', '{password}');\n"
        f"define('DB_HOST', '{host}:{port}');\n"
        "define('DB_CHARSET', 'utf8');\n"
        f"{salts}\n"
        "$table_prefix = 'wp_';\n"
        "if (!defined('ABSPATH')) { define('ABSPATH', __DIR__ . '/'); }\n"
    )


def create_site_tree(sites_root: Path, site_id: str, database: str, host: str, port: int) -> Path:
    """Create the tree and wp-config.php; a repeat leaves an existing config (and its salts) alone."""
    root = site_directory(sites_root, site_id)
    for directory in SITE_DIRECTORIES:
        (root / directory).mkdir(parents=True, exist_ok=True)
    config = root / "wp-config.php"
    # Only this step writes the config, one attempt at a time: a partial file is a killed attempt's.
    partial = config.with_suffix(".tmp")
    partial.unlink(missing_ok=True)
    if not config.is_file():
        password = site_password(sites_root, site_id, writer="filesystem")
        _write_private(partial, _wp_config(database, password, host, port))
        os.replace(partial, config)
    return root


def point_config_at(sites_root: Path, site_id: str, host: str, port: int) -> None:
    """Make wp-config.php name the database server `host:port`, if it names another (a site moved after its files
    were made); a config that names it already is left alone."""
    config = site_directory(sites_root, site_id) / "wp-config.php"
    text = config.read_text()
    wanted = f"define('DB_HOST', '{host}:{port}');"
    pointed = re.sub(r"^define\('DB_HOST', '[^']*'\);$", lambda _: wanted, text, count=1, flags=re.MULTILINE)
    if pointed == text:
        return
    partial = config.with_suffix(".host.tmp")
    partial.unlink(missing_ok=True)
    _write_private(partial, pointed)
    os.replace(partial, config)


def remove_site_tree(sites_root: Path, site_id: str) -> None:
    root = site_directory(sites_root, site_id)
    if root.exists():
        shutil.rmtree(root)
