#!/usr/bin/env bash
# Prints, as one deb822 sources file, the Debian 12 (bookworm) entries of
# this machine's own apt configuration: suites bookworm, bookworm-updates
# and bookworm-security only, so other vendors' repositories never reach
# the VM's root filesystem, and no mirror is named in the repository (the
# host's choice, a local mirror or a snapshot, is used as it is). Reads
# both the one-line format (sources.list, *.list) and deb822 (*.sources).
# Arguments name other files to read instead (the tests' testdata).
set -euo pipefail
shopt -s nullglob
files=()
if [ $# -gt 0 ]; then
  files=("$@")
else
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && files+=("$f")
  done
fi
if [ ${#files[@]} -eq 0 ]; then
  echo "sources: no apt sources in /etc/apt; the VM's root filesystem comes from this machine's Debian mirror" >&2
  exit 1
fi
awk '
  function flush() {
    if (!off && types ~ /(^| )deb( |$)/ && uris != "" && suites != "") emit(uris, suites, signed)
    types = ""; uris = ""; suites = ""; signed = ""; off = 0
  }
  function emit(u, s, k,   n, i, a, keep) {
    keep = ""
    n = split(s, a, " ")
    for (i = 1; i <= n; i++) if (a[i] ~ /^bookworm(-updates|-security)?$/) keep = keep (keep == "" ? "" : " ") a[i]
    if (keep == "") return
    print "Types: deb"; print "URIs: " u; print "Suites: " keep; print "Components: main"
    if (k != "") print "Signed-By: " k
    print ""
  }
  FNR == 1 { if (prev ~ /\.sources$/) flush(); prev = FILENAME }
  FILENAME ~ /\.sources$/ {
    if ($0 ~ /^[[:space:]]*$/) { flush(); next }
    if ($0 ~ /^#/) next
    key = tolower($1); sub(/:$/, "", key); val = $0; sub(/^[^:]*:[[:space:]]*/, "", val)
    if (key == "types") types = val
    else if (key == "uris") uris = val
    else if (key == "suites") suites = val
    else if (key == "signed-by") signed = val
    else if (key == "enabled" && tolower(val) == "no") off = 1
    next
  }
  /^[[:space:]]*deb[[:space:]]/ {
    line = $0; sub(/#.*/, "", line); n = split(line, f, /[[:space:]]+/); i = 2
    k = ""
    if (f[i] ~ /^\[/) {
      while (i <= n) { if (f[i] ~ /signed-by=/) { k = f[i]; sub(/.*signed-by=/, "", k); sub(/\]$/, "", k) } if (f[i] ~ /\]$/) break; i++ }
      i++
    }
    emit(f[i], f[i + 1], k)
  }
  END { if (prev ~ /\.sources$/) flush() }
' "${files[@]}"
