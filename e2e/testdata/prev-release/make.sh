#!/usr/bin/env bash
# Writes data.tar.gz: the data directory of an embedded `lake serve` (its
# local stage and its metadata index) as an earlier release left it, for
# TestStageOfThePreviousRelease. Run it with that release's binary:
#
#   git worktree add ../lake-prev <commit> && (cd ../lake-prev && go build -tags duckdb_arrow -o lake .)
#   e2e/testdata/prev-release/make.sh ../lake-prev/lake e2e/testdata/prev-release/data.tar.gz
#
# The data directory holds two tables:
#   clips: a.txt, b.bin, c.json put one by one (versions 1-3), c.json
#          deleted (4), d.txt put (5); a log checkpoint every 3 versions.
#   frames: five files put with one `lake put -r` (one batch).
set -euo pipefail
lake=$(realpath "$1")
out=$(realpath -m "$2")
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"
export AWS_EC2_METADATA_DISABLED=true
"$lake" serve --listen 127.0.0.1:50951 --meta-listen 127.0.0.1:50952 --data-dir data --checkpoint-interval 3 >serve.log 2>&1 &
pid=$!
export LAKE_ENDPOINT=grpc://127.0.0.1:50951
for _ in $(seq 50); do "$lake" table ls >/dev/null 2>&1 && break; sleep 0.2; done
put() { "$lake" put "$@" --no-progress --checkpoint-dir "$work/cp" >/dev/null; }

"$lake" table create clips
printf 'alpha\n' >a.txt
head -c 65536 /dev/urandom >b.bin
printf '{"k": 1}\n' >c.json
printf 'delta\n' >d.txt
put a.txt --table clips
put b.bin --table clips
put c.json --table clips
key=$("$lake" sql "SELECT file.key FROM clips WHERE name = 'c.json'" --format csv | tail -1)
"$lake" rm --table clips --key "$key" >/dev/null
put d.txt --table clips

"$lake" table create frames
mkdir frames
for i in 1 2 3 4 5; do printf 'frame %s\n' "$i" >"frames/$i.txt"; done
put -r frames --table frames

kill -TERM "$pid"
wait "$pid" || true
rm -rf data/query # the query role's cache: rebuilt on demand
tar -czf "$out" data
echo "wrote $out"
