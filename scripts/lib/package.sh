# shellcheck shell=bash
# What ./dev install and scripts/package/ share, sourced by lib.sh.

# Copies what pgrx does not into the extension directory $1 (as_root where it is not writable),
# from the sources in $2 (default: this checkout): the install scripts of older releases in sql/
# (for CREATE EXTENSION ... VERSION '0.1.0') and the read extension's (an old one lacks those).
copy_base_scripts() {
    local dest=$1 src=${2:-$PGSF_ROOT} script scripts=() sudo=()
    for script in "$src"/sql/pg_snowflake--*.sql "$src"/pg_snowflake_read.control \
        "$src"/sql/pg_snowflake_read--*.sql; do
        # Not an upgrade script (pg_snowflake--A--B.sql): pgrx copies those.
        [ ! -e "$script" ] || [[ ${script##*/} == pg_snowflake--*--* ]] || scripts+=("$script")
    done
    [ -w "$dest" ] || sudo=(as_root)
    [ ${#scripts[@]} -eq 0 ] || "${sudo[@]}" install -m 644 -t "$dest" "${scripts[@]}"
}

# The time of the last commit (now, outside git): the packages' and the image's dates.
source_date() { git -C "$PGSF_ROOT" log -1 --format=%ct 2>/dev/null || date +%s; }

# The extension's version, and the pgrx version it pins (pgrx = "=x.y.z"): Cargo.toml's.
cargo_version() { sed -n 's/^version = "\(.*\)"$/\1/p' "$PGSF_ROOT/Cargo.toml" | head -n 1; }
pgrx_version() { sed -n 's/^pgrx = "=\(.*\)"$/\1/p' "$PGSF_ROOT/Cargo.toml"; }

# packaging/copyright, with the year of the last commit, into file $1.
copyright_file() {
    sed "s/@YEAR@/$(date -u -d "@$(source_date)" +%Y)/" "$PGSF_ROOT/packaging/copyright" >"$1"
}

# parse_package_args KIND --pg N [--debug] [--image]: sets major, profile (release or debug),
# version and image (1 with --image); refuses a tree whose packages column lacks KIND (or image).
parse_package_args() {
    local kind=$1 arg
    shift
    parse_majors "$@"
    [ ${#MAJORS[@]} -eq 1 ] || usage
    major=${MAJORS[0]} profile=release version=$(cargo_version) image=''
    for arg in "${ARGS[@]}"; do
        case $arg in
        --debug) profile=debug ;;
        --image) image=1 ;;
        *) usage ;;
        esac
    done
    for kind in "$kind" ${image:+image}; do
        tree_packages "$kind" "$major" ||
            die "PostgreSQL $major gets no $kind package (PGSF_TREE_TABLE: ${PGSF_TREE_PACKAGES[$major]})"
    done
}

# package_tree STAGE LIBDIR EXTDIR MODE: `cargo pgrx package` of the $profile build for $PG_CONFIG
# (use_pg first; $cross: cross-built for that target), staged: the library, stripped, in
# STAGE/LIBDIR (mode MODE); the control file, pgrx's scripts and the base scripts in STAGE/EXTDIR.
package_tree() {
    local libdir=$1$2 extdir=$1$3 mode=$4 flags=() tree strip=strip lock
    tree=${CARGO_TARGET_DIR:-$PGSF_ROOT/target}${cross:+/$cross}/$profile/pg_snowflake-pg$PG_MAJOR
    # One package run per tree at a time (another test's, a build made ahead: stage_servers):
    # pgrx writes the tree after cargo's lock is released, and it is read back below.
    mkdir -p "${tree%/*}" && exec {lock}>"$tree.lock" && flock "$lock"
    rm -rf "$tree" # pgrx adds to an existing tree: start empty
    say "Building the $profile build for PostgreSQL $PG_MAJOR${cross:+ on $cross}" \
        "with cargo pgrx package"
    [ "$profile" = release ] || flags=(--debug)
    [ -z "${cross:-}" ] || flags+=(--target "$cross") strip=${cross/-unknown/}-strip
    (cd "$PGSF_ROOT" && cargo pgrx package --pg-config "$PG_CONFIG" "${flags[@]}")
    install -d -m 755 "$libdir" "$extdir"
    install -m "$mode" "$tree$("$PG_CONFIG" --pkglibdir)/pg_snowflake.so" "$libdir/"
    "$strip" --strip-unneeded --remove-section=.comment --remove-section=.note \
        "$libdir/pg_snowflake.so"
    install -m 644 "$tree$("$PG_CONFIG" --sharedir)/extension"/* "$extdir/"
    exec {lock}>&-
    copy_base_scripts "$extdir"
}

# make_deb STAGE ARCH DEB [TARBALL]: the package postgresql-$major-pg-snowflake of $version for
# ARCH in DEB (its fields: packaging/control's, filled in), from $profile's build staged in STAGE
# where Debian and apt.postgresql.org put an extension of $major (and that tree in TARBALL);
# lintian's errors and warnings fail it.
make_deb() {
    local stage=$1 arch=$2 deb=$3 name=postgresql-$major-pg-snowflake
    local doc=/usr/share/doc/$name overrides=/usr/share/lintian/overrides
    local maintainer
    maintainer=$(sed -n 's/^Maintainer: //p' "$PGSF_ROOT/packaging/control")
    rm -rf "$stage" "$deb" ${4:+"$4"}
    package_tree "$stage" "/usr/lib/postgresql/$major/lib" "/usr/share/postgresql/$major/extension" 644
    install -d -m 755 "$stage$doc" "$stage$overrides" "$stage/DEBIAN"
    if [ -n "${4:-}" ]; then
        tar --create --gzip --file "$4" --directory "$stage" --sort=name \
            --owner=0 --group=0 --numeric-owner usr
        say "Packed $4 (unpack at / on a Debian machine with PostgreSQL $major):"
        tar --list --verbose --gzip --file "$4"
    fi
    sed -e "s/@MAJOR@/$major/g" -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" \
        -e "s/@SIZE@/$(du -sk --exclude=DEBIAN "$stage" | cut -f1)/" \
        "$PGSF_ROOT/packaging/control" >"$stage/DEBIAN/control"
    copyright_file "$stage$doc/copyright"
    printf '%s (%s-1) unstable; urgency=medium\n\n  * pg_snowflake %s for PostgreSQL %s.\n\n -- %s  %s\n' \
        "$name" "$version" "$version" "$major" "$maintainer" \
        "$(date -R -d "@$(source_date)")" | gzip -9n >"$stage$doc/changelog.Debian.gz"
    # Built from this repository, not uploaded to Debian: no ITP bug for the changelog to close.
    echo "$name: initial-upload-closes-no-bugs" >"$stage$overrides/$name"
    chmod 644 "$stage$doc"/* "$stage$overrides/$name"
    install -d -m 755 "$stage$doc/examples"
    install -m 644 -t "$stage$doc/examples" "$PGSF_ROOT"/packaging/monitoring/*.{yaml,json}
    (cd "$stage" && find usr -type f -print0 | sort -z | xargs -0 md5sum) >"$stage/DEBIAN/md5sums"
    chmod 644 "$stage/DEBIAN/md5sums" "$stage/DEBIAN/control"
    # xz for the release build, which users install; gzip at its fastest for a debug one (the
    # tests' on every major), which xz took 5 CPU-seconds to pack against gzip's 0.2.
    local packing=(-Zxz)
    [ "$profile" = release ] || packing=(-Zgzip -z1)
    dpkg-deb --build --root-owner-group "${packing[@]}" "$stage" "$deb" >/dev/null
    say "Built $deb:"
    dpkg-deb --contents "$deb"
    apt_install "to check the .deb" lintian
    say "lintian $deb"
    lintian --fail-on error,warning --suppress-tags-from-file /dev/null "$deb"
}

# make_image STAGE DISTRO ARCH ARCHIVE: the extension image of $version for $major in ARCHIVE,
# from scratch with buildah (nothing pulled; as root, in a storage of its own, removed after):
# STAGE's lib/ and share/extension/ and the licence, tagged and labelled for CloudNativePG, run as
# 65532:65532; the last commit's files and times, so the same commit and build make the same layer.
make_image() {
    local stage=$1 distro=$2 arch=$3 archive=$4 built sql_version entry tag container immutable
    local layout=${4%.tar} licenses=$1/licenses/pg_snowflake rolling=$version-$major-$2
    local control=$1/share/extension/pg_snowflake.control
    built=$(source_date)
    immutable=$version-$(date -u -d "@$built" +%Y%m%d%H%M)-$major-$distro
    install -d -m 755 "$licenses"
    install -m 644 "$PGSF_ROOT/LICENSE" "$licenses/LICENSE"
    copyright_file "$licenses/copyright"
    chmod 644 "$licenses/copyright"
    sql_version=$(sed -n "s/^default_version = '\(.*\)'\$/\1/p" "$control")
    [ -n "$sql_version" ] || die "no default_version in $control"
    # The labels, as postgres-extensions-containers gives them (io.cloudnativepg.image.base.name:
    # the CloudNativePG image whose glibc the library needs). No .source or .url: no public address
    # yet. Removed: the empty base.digest buildah gives an image from scratch.
    local about="A pg_snowflake $version extension image for PostgreSQL $major on $distro ($arch)"
    local oci=("created=$(date -u -d "@$built" +%Y-%m-%dT%H:%M:%SZ)" "version=$version"
        "revision=$(git -C "$PGSF_ROOT" rev-parse HEAD)" "title=pg_snowflake $version $major $distro"
        "description=$about, for CloudNativePG's image volume extensions" licenses=MIT
        "vendor=pg_snowflake developers" "authors=pg_snowflake developers" base.name=scratch)
    local cnpg=("base.name=ghcr.io/cloudnative-pg/postgresql:$major-minimal-$distro"
        "base.pgmajor=$major" "base.os=$distro" "sql.version=$sql_version")
    local config=(--user 65532:65532 --arch "$arch" --os linux
        --annotation org.opencontainers.image.base.digest-)
    for entry in "${oci[@]/#/org.opencontainers.image.}" "${cnpg[@]/#/io.cloudnativepg.image.}"; do
        config+=(--label "$entry" --annotation "$entry")
    done
    IMAGE_STORAGE=$(mktemp -d /tmp/pgsf-buildah.XXXXXX)
    trap 'as_root rm -rf "$IMAGE_STORAGE"' EXIT
    in_storage() {
        as_root buildah --root "$IMAGE_STORAGE/root" --runroot "$IMAGE_STORAGE/run" \
            --storage-driver vfs "$@"
    }
    say "Building the image pg_snowflake:$immutable (and :$rolling) from scratch with buildah"
    container=$(in_storage from --quiet --arch "$arch" scratch)
    in_storage copy --quiet "$container" "$stage" / >/dev/null
    in_storage config "${config[@]}" "$container"
    in_storage commit --quiet --rm --identity-label=false --format oci --timestamp "$built" \
        "$container" "pg_snowflake:$immutable" >/dev/null
    # Pushed to an OCI layout once per tag (a push to an oci-archive writes an archive of one tag),
    # then archived with the commit's time and no owner: the same for the same commit.
    rm -rf "$layout" "$archive"
    for tag in "$rolling" "$immutable"; do
        in_storage push --quiet --disable-compression=false "pg_snowflake:$immutable" \
            "oci:$layout:$tag"
    done
    as_root chown -R "$(id -u):$(id -g)" "$layout"
    tar --create --file "$archive" --directory "$layout" --sort=name --mtime="@$built" \
        --owner=0 --group=0 --numeric-owner .
    rm -rf "$layout"
    say "Built $archive ($(du -k "$archive" | cut -f1) kB), the image pg_snowflake:$immutable" \
        "and pg_snowflake:$rolling for $arch, running as 65532:65532:"
    (cd "$stage" && find . -type f -printf '%M %8s %P\n' | sort -k3)
}
