"""WordPress's core tables, in PostgreSQL's dialect, and the rows a fresh install writes."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from hashlib import sha256

import asyncpg

CORE_TABLES = (
    "wp_options",
    "wp_users",
    "wp_usermeta",
    "wp_posts",
    "wp_postmeta",
    "wp_comments",
    "wp_commentmeta",
    "wp_terms",
    "wp_term_taxonomy",
    "wp_term_relationships",
    "wp_termmeta",
    "wp_links",
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS wp_options (
    option_id bigserial PRIMARY KEY, option_name varchar(191) NOT NULL UNIQUE,
    option_value text NOT NULL, autoload varchar(20) NOT NULL DEFAULT 'yes');
CREATE TABLE IF NOT EXISTS wp_users (
    id bigserial PRIMARY KEY, user_login varchar(60) NOT NULL UNIQUE, user_pass varchar(255) NOT NULL,
    user_nicename varchar(50) NOT NULL DEFAULT '', user_email varchar(100) NOT NULL DEFAULT '',
    user_url varchar(100) NOT NULL DEFAULT '', user_registered timestamptz NOT NULL DEFAULT now(),
    user_activation_key varchar(255) NOT NULL DEFAULT '', user_status int NOT NULL DEFAULT 0,
    display_name varchar(250) NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS wp_usermeta (
    umeta_id bigserial PRIMARY KEY, user_id bigint NOT NULL DEFAULT 0, meta_key varchar(255),
    meta_value text, UNIQUE (user_id, meta_key));
CREATE TABLE IF NOT EXISTS wp_posts (
    id bigserial PRIMARY KEY, post_author bigint NOT NULL DEFAULT 0,
    post_date timestamptz NOT NULL DEFAULT now(), post_content text NOT NULL DEFAULT '',
    post_title text NOT NULL DEFAULT '', post_excerpt text NOT NULL DEFAULT '',
    post_status varchar(20) NOT NULL DEFAULT 'publish', comment_status varchar(20) NOT NULL DEFAULT 'open',
    ping_status varchar(20) NOT NULL DEFAULT 'open', post_password varchar(255) NOT NULL DEFAULT '',
    post_name varchar(200) NOT NULL DEFAULT '', post_modified timestamptz NOT NULL DEFAULT now(),
    post_parent bigint NOT NULL DEFAULT 0, guid varchar(255) NOT NULL DEFAULT '',
    menu_order int NOT NULL DEFAULT 0, post_type varchar(20) NOT NULL DEFAULT 'post',
    post_mime_type varchar(100) NOT NULL DEFAULT '', comment_count bigint NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS wp_postmeta (
    meta_id bigserial PRIMARY KEY, post_id bigint NOT NULL DEFAULT 0, meta_key varchar(255), meta_value text);
CREATE TABLE IF NOT EXISTS wp_comments (
    comment_id bigserial PRIMARY KEY, comment_post_id bigint NOT NULL DEFAULT 0,
    comment_author text NOT NULL DEFAULT '', comment_author_email varchar(100) NOT NULL DEFAULT '',
    comment_author_url varchar(200) NOT NULL DEFAULT '', comment_author_ip varchar(100) NOT NULL DEFAULT '',
    comment_date timestamptz NOT NULL DEFAULT now(), comment_content text NOT NULL DEFAULT '',
    comment_karma int NOT NULL DEFAULT 0, comment_approved varchar(20) NOT NULL DEFAULT '1',
    comment_agent varchar(255) NOT NULL DEFAULT '', comment_type varchar(20) NOT NULL DEFAULT 'comment',
    comment_parent bigint NOT NULL DEFAULT 0, user_id bigint NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS wp_commentmeta (
    meta_id bigserial PRIMARY KEY, comment_id bigint NOT NULL DEFAULT 0, meta_key varchar(255),
    meta_value text);
CREATE TABLE IF NOT EXISTS wp_terms (
    term_id bigserial PRIMARY KEY, name varchar(200) NOT NULL DEFAULT '',
    slug varchar(200) NOT NULL DEFAULT '', term_group bigint NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS wp_term_taxonomy (
    term_taxonomy_id bigserial PRIMARY KEY, term_id bigint NOT NULL DEFAULT 0,
    taxonomy varchar(32) NOT NULL DEFAULT '', description text NOT NULL DEFAULT '',
    parent bigint NOT NULL DEFAULT 0, count bigint NOT NULL DEFAULT 0, UNIQUE (term_id, taxonomy));
CREATE TABLE IF NOT EXISTS wp_term_relationships (
    object_id bigint NOT NULL DEFAULT 0, term_taxonomy_id bigint NOT NULL DEFAULT 0,
    term_order int NOT NULL DEFAULT 0, PRIMARY KEY (object_id, term_taxonomy_id));
CREATE TABLE IF NOT EXISTS wp_termmeta (
    meta_id bigserial PRIMARY KEY, term_id bigint NOT NULL DEFAULT 0, meta_key varchar(255), meta_value text);
CREATE TABLE IF NOT EXISTS wp_links (
    link_id bigserial PRIMARY KEY, link_url varchar(255) NOT NULL DEFAULT '',
    link_name varchar(255) NOT NULL DEFAULT '', link_target varchar(25) NOT NULL DEFAULT '',
    link_visible varchar(20) NOT NULL DEFAULT 'Y', link_owner bigint NOT NULL DEFAULT 1,
    link_rating int NOT NULL DEFAULT 0, link_notes text NOT NULL DEFAULT '');
"""


@dataclass(frozen=True)
class Install:
    name: str
    tagline: str
    domain: str
    admin_email: str


async def create_schema(connection: asyncpg.Connection) -> None:
    """The core tables, as the connection's user, in one transaction: a warm pool's template."""
    async with connection.transaction():
        await connection.execute(_SCHEMA)


async def give_tables_to(connection: asyncpg.Connection, owner: str) -> None:
    """Hand every core table (and the sequences of its serial columns, which follow it) to `owner`."""
    async with connection.transaction():
        for table in CORE_TABLES:
            await connection.execute(f"ALTER TABLE {table} OWNER TO {owner}")


_INSTALL_ROWS = """
WITH options AS (
    INSERT INTO wp_options (option_name, option_value)
    SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT DO NOTHING),
admin AS (
    INSERT INTO wp_users (user_login, user_pass, user_nicename, user_email, display_name)
    VALUES ('admin', $3, 'admin', $4, 'admin')
    ON CONFLICT (user_login) DO UPDATE SET user_login = EXCLUDED.user_login RETURNING id)
INSERT INTO wp_usermeta (user_id, meta_key, meta_value)
SELECT id, 'wp_capabilities', 'a:1:{s:13:"administrator";b:1;}' FROM admin ON CONFLICT DO NOTHING
"""


async def install(connection: asyncpg.Connection, owner: str, site: Install) -> None:
    """Create the schema as `owner`, unless the database came with it (a warm pool's), and write the install
    rows, all in one transaction: all or nothing."""
    options = {
        "siteurl": f"https://{site.domain}",
        "home": f"https://{site.domain}",
        "blogname": site.name,
        "blogdescription": site.tagline,
        "admin_email": site.admin_email,
    }
    async with connection.transaction():
        # The tables belong to the site's role, which WordPress logs in as.
        await connection.execute(f"SET LOCAL ROLE {owner}")
        # The schema is made in one transaction, here or in the template, so its last table says it is whole.
        if await connection.fetchval(f"SELECT to_regclass('{CORE_TABLES[-1]}') IS NULL"):
            await connection.execute(_SCHEMA)
        # Nobody knows this password: the owner sets one through WordPress's reset flow.
        unusable = sha256(secrets.token_bytes(32)).hexdigest()
        # The options, the admin user and its capabilities in one statement: on this new connection, each
        # statement of its own would cost a round trip to prepare it and another to run it.
        await connection.execute(_INSTALL_ROWS, list(options), list(options.values()), unusable, site.admin_email)
