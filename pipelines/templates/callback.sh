set -euo pipefail
[ -n "${CALLBACK_URL}" ] || { echo "no CRCR_CALLBACK_URL secret: no callback"; exit 0; }
jq -n --arg status "${STATUS:-in_progress}" --arg conclusion "${CONCLUSION:-}" --arg sha "${TORCH_SHA}" \
  --arg pr "${PR_NUMBER}" --arg name "testcurator shard ${SHARD}/${SHARDS}" --arg url "${RUN_URL}" \
  '{name: $name, head_sha: $sha, pr_number: $pr, status: $status, details_url: $url}
   + (if $conclusion == "" then {} else {conclusion: $conclusion} end)' > callback.json
curl -fsS -X POST -H "Authorization: Bearer ${CALLBACK_TOKEN}" -H "Content-Type: application/json" \
  --data @callback.json "${CALLBACK_URL}"
