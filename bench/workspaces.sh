#!/usr/bin/env bash
# Times making a workspace and computing its changes the way src/workspace does it, beside
# plain `git worktree add` and `git diff --stat`, on repositories of 100, 10,000 and 100,000
# files (median of RUNS runs). Usage: bench/workspaces.sh [sizes...]
set -euo pipefail
RUNS=${RUNS:-3}
[ $# -gt 0 ] && SIZES=("$@") || SIZES=(100 10000 100000)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@b

ms() { local s=$(date +%s%N); "$@" >/dev/null 2>&1; echo $(( ($(date +%s%N) - s) / 1000000 )); }
median() { printf '%s\n' "$@" | sort -n | sed -n "$(( ($# + 1) / 2 ))p"; }

make_repo() { # dir files
  mkdir -p "$1"; git -C "$1" init -q -b main
  ( cd "$1"; for d in $(seq 0 99); do mkdir -p "d$d"; done
    for i in $(seq 0 $(( $2 - 1 ))); do echo "file $i of the benchmark repository" > "d$(( i % 100 ))/f$i.txt"; done )
  git -C "$1" add -A; git -C "$1" commit -q -m base
}

# The change of a turn: 10 files edited, 1 added.
change() { for i in 0 1 2 3 4 5 6 7 8 9; do echo more >> "$1/d$i/f$i.txt"; done; echo new > "$1/new.txt"; }

ws_make() { # src dst
  git clone --quiet --shared --no-checkout --no-tags --single-branch -- "$1" "$2/repo"
  git -C "$2/repo" remote remove origin
  git -C "$2/repo" checkout --quiet -b agent-host/bench HEAD
}
ws_changes() { # checkout
  local idx="$1/../index.tmp"; cp "$1/.git/index" "$idx"
  GIT_INDEX_FILE=$idx git -C "$1" add -A
  GIT_INDEX_FILE=$idx git -C "$1" diff --cached -M --raw --numstat -z HEAD
  GIT_INDEX_FILE=$idx git -C "$1" diff --cached -M --binary --full-index HEAD
  rm -f "$idx"
}

printf '| files | git worktree add | clone --shared + checkout | git diff --stat | changes (add -A to a temporary index + 2 diffs) |\n'
printf '|---|---|---|---|---|\n'
for n in "${SIZES[@]}"; do
  src="$TMP/src$n"; make_repo "$src" "$n"
  wt=(); cl=(); df=(); ch=()
  for r in $(seq 1 "$RUNS"); do
    wt+=("$(ms git -C "$src" worktree add -q -b "wt$r" "$TMP/wt$n-$r" HEAD)")
    cl+=("$(ms ws_make "$src" "$TMP/ws$n-$r")")
    change "$TMP/wt$n-$r"; change "$TMP/ws$n-$r/repo"
    df+=("$(ms git -C "$TMP/wt$n-$r" diff --stat)")
    ch+=("$(ms ws_changes "$TMP/ws$n-$r/repo")")
  done
  printf '| %s | %s ms | %s ms | %s ms | %s ms |\n' "$n" "$(median "${wt[@]}")" "$(median "${cl[@]}")" "$(median "${df[@]}")" "$(median "${ch[@]}")"
done
