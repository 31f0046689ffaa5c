set -euo pipefail
api() { curl -fsSL -H "Authorization: Bearer ${GH_TOKEN}" -H "Accept: application/vnd.github+json" "https://api.github.com/repos/${TORCH_REPO}/$1"; }
printf '%s\n' "${PAYLOAD_JSON}" > payload.json
run=false; sha=""; pr=""; tier="${DISPATCH_TIER}"; labels="${DISPATCH_LABELS}"
case "${EVENT_NAME}" in
  repository_dispatch)
    action=$(jq -r '.payload.action // ""' payload.json)
    base=$(jq -r '.payload.pull_request.base.ref // ""' payload.json)
    pr=$(jq -r '.payload.pull_request.number // .payload.number // ""' payload.json)
    sha=$(jq -r '.payload.pull_request.merge_commit_sha // .payload.pull_request.head.sha // ""' payload.json)
    case "${action}" in opened|reopened|synchronize|closed|labeled) ;; *) echo "skip: action '${action}'"; sha="";; esac
    if [ -n "${sha}" ] && ! printf '%s\n' "${base}" | grep -Eq "^(${BRANCHES})\$"; then
      echo "skip: base branch '${base}' is not one of ${BRANCHES}"; sha=""
    fi
    if [ -n "${sha}" ] && [ -n "${REQUIRED_LABEL}" ]; then
      has=$(jq -r --arg l "${REQUIRED_LABEL}" '.payload.pull_request.labels // [] | map(.name) | index($l) // ""' payload.json)
      # The label race: the relay may dispatch before the label lands. Poll the
      # PR's labels for a while; a merged PR counts as labelled (manual merges
      # skip the label).
      waited=0
      while [ -z "${has}" ] && [ "${waited}" -lt "${LABEL_WAIT_S}" ]; do
        if [ "$(jq -r '.payload.pull_request.merged // false' payload.json)" = "true" ]; then has=merged; break; fi
        sleep 30; waited=$((waited + 30))
        has=$(api "issues/${pr}/labels" | jq -r --arg l "${REQUIRED_LABEL}" 'map(.name) | index($l) // ""' || true)
      done
      if [ -z "${has}" ]; then echo "skip: PR ${pr} has no label '${REQUIRED_LABEL}' after ${waited} s"; sha=""; fi
    fi
    ;;
  schedule)
    tier="${SCHEDULE_TIER}"; labels="${SCHEDULE_LABELS}"
    nightly=$(api "commits?sha=nightly&per_page=1" | jq -r '.[0].sha // empty')
    if [ -z "${nightly}" ]; then echo "::error::Could not resolve HEAD for ${TORCH_REPO}@nightly"; exit 1; fi
    message=$(api "commits/${nightly}" | jq -r '.commit.message')
    sha=$(printf '%s\n' "${message}" | grep -oP '\(([a-f0-9]{40})\)' | tr -d '()' | head -n 1 || true)
    if [ -z "${sha}" ]; then echo "::error::Could not extract the source SHA from the nightly commit"; exit 1; fi
    echo "Resolved ${TORCH_REPO}@nightly -> source ${sha}"
    ;;
  workflow_dispatch)
    tier="${INPUT_TIER}"; labels="${INPUT_LABELS}"
    sha=$(api "commits/${INPUT_REF}" | jq -r '.sha // empty')
    if [ -z "${sha}" ]; then echo "::error::Could not resolve ${TORCH_REPO}@${INPUT_REF}"; exit 1; fi
    echo "Resolved ${TORCH_REPO}@${INPUT_REF} -> ${sha}"
    ;;
esac
[ -n "${sha}" ] && run=true
{ echo "run=${run}"; echo "torch_sha=${sha}"; echo "tier=${tier}"; echo "labels=${labels}"; echo "pr_number=${pr}"; } >> "${GITHUB_OUTPUT}"
jq -n --arg event "${EVENT_NAME}" --arg sha "${sha}" --arg tier "${tier}" --arg labels "${labels}" --arg pr "${pr}" \
  --slurpfile payload payload.json '{event: $event, torch_sha: $sha, tier: $tier, labels: $labels, pr_number: $pr, payload: $payload[0]}' > dispatch.json
