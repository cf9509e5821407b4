# For PGXN (`pgxn install`), not the build: build, test and package with ./dev. The PGXS build
# of pg_snowflake, for PGXN's client and anyone used to `make && make install`.
# pgxnclient (commands/install.py) runs, with PG_CONFIG set to the PostgreSQL it installs into:
#
#   make all           builds with cargo pgrx package (scripts/package/pgxn-make) into target/pgxn/pgN/,
#                      after checking for cargo, Rust 1.96 or later, cargo-pgrx of the pgrx
#                      version Cargo.toml pins and that PostgreSQL's server headers; it installs
#                      none of them, and names what is missing and how to get it
#   make install       copies what `make all` built (pgxn install; under sudo when PostgreSQL's
#                      libdir is not writable: it needs no Rust, no cargo, no environment)
#   make uninstall     removes those files again (pgxn uninstall)
#   make installcheck  the regression test test/sql/pg_snowflake.sql against the running server,
#                      with pg_regress, in CONTRIB_TESTDB (pgxn check). The server must preload
#                      the library and have a node id (any): shared_preload_libraries =
#                      'pg_snowflake' and pg_snowflake.node_id = N in postgresql.conf, since the
#                      test makes IDs; PGHOST, PGPORT and PGUSER say where it is, as for psql
PG_CONFIG ?= pg_config
PGXS := $(shell "$(PG_CONFIG)" --pgxs 2>/dev/null)
ifeq ($(PGXS),)
$(error no pg_config at '$(PG_CONFIG)': PG_CONFIG=/path/to/pg_config (pgxn: --pg_config) names the PostgreSQL to build for)
endif

EXTVERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' Cargo.toml | head -n 1)
PG_MAJOR := $(shell "$(PG_CONFIG)" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
# One directory per major, so that a build for one PostgreSQL is never installed into another.
BUILT = target/pgxn/pg$(PG_MAJOR)

MODULEDIR = extension
# The base and upgrade scripts as sql/ keeps them, and the SQL-only read extension's files; the
# control file and the current version's script as pgrx generates them.
DATA = $(wildcard sql/pg_snowflake--*.sql) pg_snowflake_read.control \
	$(wildcard sql/pg_snowflake_read--*.sql)
DATA_built = $(BUILT)/pg_snowflake.control $(BUILT)/pg_snowflake--$(EXTVERSION).sql
REGRESS = pg_snowflake
REGRESS_OPTS = --inputdir=test
EXTRA_CLEAN = $(BUILT)

include $(PGXS)

# What the library is built from: a change to any of it rebuilds; nothing changed, `make install`
# (perhaps as root) finds it up to date and runs no cargo.
SOURCES = Cargo.toml Cargo.lock pg_snowflake.control core/Cargo.toml \
	$(shell find src core/src -name '*.rs') $(wildcard sql/*.sql sql/install/*.sql)

all: $(BUILT)/pg_snowflake.so

$(BUILT)/pg_snowflake.so: $(SOURCES)
	./scripts/package/pgxn-make "$(PG_CONFIG)" "$(BUILT)"

$(DATA_built): $(BUILT)/pg_snowflake.so ;

# The library is neither MODULES nor MODULE_big (PGXS would compile it from C): installed and
# removed here, beside PGXS's own install and uninstall of the scripts.
install: install-library
install-library: all
	$(MKDIR_P) '$(DESTDIR)$(pkglibdir)'
	$(INSTALL_SHLIB) $(BUILT)/pg_snowflake.so '$(DESTDIR)$(pkglibdir)/'

uninstall: uninstall-library
uninstall-library:
	rm -f '$(DESTDIR)$(pkglibdir)/pg_snowflake.so'

.PHONY: install-library uninstall-library
