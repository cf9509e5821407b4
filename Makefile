# For PGXN's client: `pgxn install pg_snowflake` (pgxnclient) builds and installs a release
# with `make PG_CONFIG=... all`, then `make PG_CONFIG=... install` (under sudo when
# PostgreSQL's directories are not writable). The build is the README's source recipe (./dev
# setup, then the release build for that PostgreSQL); the install copies the built files and
# needs no Rust, so it works under sudo: scripts/pgxn-make.
PG_CONFIG ?= pg_config

all:
	./scripts/pgxn-make all "$(PG_CONFIG)"

install:
	./scripts/pgxn-make install "$(PG_CONFIG)"

.PHONY: all install
