# Sourced by the scripts that fetch packages of other Debian releases without installing
# them (glibc-trees.sh, vm-kernels.sh): a private apt state, on this machine's Debian
# mirror, that `apt-get download` and `apt-cache` use through "${apt_opts[@]}".
#
#   private_apt DIR "SUITE [ARCHIVE]"...   ARCHIVE is debian (default) or debian-security

# The Debian mirror of this machine's apt sources (deb822 or one-line), without a
# trailing slash.
debian_mirror() {
  local mirror="" f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    mirror=$(awk '/^URIs:/ && $2 ~ /debian\/?$/ {print $2; exit}' "$f")
    [ -n "$mirror" ] && break
  done
  if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
    mirror=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' /etc/apt/sources.list)
  fi
  [ -n "$mirror" ] || { echo "$(basename "$0"): no Debian mirror in this machine's apt sources" >&2; return 1; }
  echo "${mirror%/}"
}

private_apt() {
  local apt=$1 mirror s
  shift
  mirror=$(debian_mirror) || return 1
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs"
  for s in "$@"; do
    set -- $s
    echo "deb [trusted=yes] ${mirror%/debian}/${2:-debian} $1 main"
  done | sort -u > "$apt/sources.list"
  apt_opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
            -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o Debug::NoLocking=1
            -o APT::Sandbox::User=root -qq)
  apt-get "${apt_opts[@]}" update >&2
}
