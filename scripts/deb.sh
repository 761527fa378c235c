#!/usr/bin/env bash
# Builds the Debian package target/debian/membloat-exporter_VERSION_ARCH.deb with
# dpkg-deb, from the release binary and the files the repository ships:
#   /usr/bin/membloat_exporter
#   /lib/systemd/system/membloat-exporter.service  deploy/systemd's hardened unit, run as
#                                                   the system user membloat-exporter
#   /etc/default/membloat-exporter                 ARGS= (a conffile)
#   /usr/share/membloat-exporter/                   rules, rule tests, mixin, dashboards,
#                                                   an example web config
# The maintainer scripts (deploy/debian/) add the user, enable and start the unit, restart
# it on upgrade, and remove both on purge. MEMBLOAT_DEB_VERSION overrides the version
# (Cargo.toml's). Prints the package's path.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${MEMBLOAT_DEB_VERSION:-$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)}
arch=$(dpkg --print-architecture)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
cargo build --release --locked --bin membloat_exporter >&2
root=target/debian/membloat-exporter_${version}_$arch
rm -rf "$root"
share=$root/usr/share/membloat-exporter
doc=$root/usr/share/doc/membloat-exporter
install -d "$root/DEBIAN" "$root/usr/bin" "$root/lib/systemd/system" "$root/etc/default" \
  "$share/prometheus" "$share/grafana" "$share/mixin/dashboards" "$doc"
strip -o "$root/usr/bin/membloat_exporter" target/release/membloat_exporter
chmod 0755 "$root/usr/bin/membloat_exporter"

# The unit of deploy/systemd with the package's paths and its system user: DynamicUser=
# keeps its sandboxing and takes the static user, since one of that name exists.
{
  echo "# membloat-exporter.service, from the Debian package membloat-exporter. Flags go in"
  echo "# /etc/default/membloat-exporter (ARGS=); after editing: systemctl restart membloat-exporter."
  sed -e '1,/^#   systemctl daemon-reload/d' \
      -e 's|^EnvironmentFile=-/etc/default/membloat_exporter$|EnvironmentFile=-/etc/default/membloat-exporter|' \
      -e 's|^ExecStart=/usr/local/bin/membloat_exporter |ExecStart=/usr/bin/membloat_exporter |' \
      -e 's|runs as a transient unprivileged user|runs as the unprivileged system user membloat-exporter|' \
      -e 's|^DynamicUser=yes$|DynamicUser=yes\nUser=membloat-exporter\nGroup=membloat-exporter|' \
      deploy/systemd/membloat_exporter.service
} > "$root/lib/systemd/system/membloat-exporter.service"
sed 's|/etc/default/membloat_exporter|/etc/default/membloat-exporter|' \
  deploy/systemd/membloat_exporter.env > "$root/etc/default/membloat-exporter"
for want in 'EnvironmentFile=-/etc/default/membloat-exporter' \
  'ExecStart=/usr/bin/membloat_exporter $ARGS' 'User=membloat-exporter'; do
  grep -qxF "$want" "$root/lib/systemd/system/membloat-exporter.service" \
    || { echo "deb.sh: the unit in deploy/systemd changed shape: no '$want'" >&2; exit 1; }
done

cp deploy/prometheus/membloat.rules.yml deploy/prometheus/membloat.rules.test.yml "$share/prometheus/"
cp deploy/web-config.yml "$share/"
cp grafana/*.json grafana/provisioning.yml "$share/grafana/"
cp mixin/*.libsonnet mixin/jsonnetfile.json "$share/mixin/"
cp mixin/dashboards/*.libsonnet "$share/mixin/dashboards/"
cp deploy/debian/copyright "$doc/"
gzip -9n < README.md > "$doc/README.md.gz"
printf 'membloat-exporter (%s) unstable; urgency=medium\n\n  * Built from %s.\n\n -- membloat_exporter developers <membloat@example.org>  %s\n' \
  "$version" "$(git rev-parse --short HEAD 2>/dev/null || echo source)" \
  "$(date -R -u -d "@$SOURCE_DATE_EPOCH")" | gzip -9n > "$doc/changelog.Debian.gz"

# libc6: the newest glibc symbol version the binary needs.
glibc=$(objdump -T "$root/usr/bin/membloat_exporter" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
cat > "$root/DEBIAN/control" <<CONTROL
Package: membloat-exporter
Version: $version
Architecture: $arch
Maintainer: membloat_exporter developers <membloat@example.org>
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: adduser, libc6 (>= $glibc), libgcc-s1
Section: net
Priority: optional
Homepage: https://github.com/membloat/membloat_exporter
Description: Prometheus exporter for memory bloat and OOM risk on Linux
 membloat_exporter finds memory that Linux hosts lose without showing it: glibc
 allocators hoarding freed memory, arena bloat, khugepaged regrowth of released
 memory, and overcommit and OOM-killer risk. It serves them on /metrics for
 Prometheus (port 10293), with alerting and recording rules and Grafana
 dashboards under /usr/share/membloat-exporter.
CONTROL
echo /etc/default/membloat-exporter > "$root/DEBIAN/conffiles"
install -m 0755 deploy/debian/postinst deploy/debian/prerm deploy/debian/postrm "$root/DEBIAN/"
(cd "$root" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
find "$root" -type d -exec chmod 0755 {} +
find "$root" -type f ! -path "$root/DEBIAN/*" ! -path "$root/usr/bin/*" -exec chmod 0644 {} +
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
deb=target/debian/membloat-exporter_${version}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >&2
echo "$PWD/$deb"
