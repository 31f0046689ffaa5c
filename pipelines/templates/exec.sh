set -uo pipefail
durations=()
[ -f "backend/${CONFIG_DIR}/.test_durations" ] && durations=(--durations "backend/${CONFIG_DIR}/.test_durations")
# Config labels select files for this trigger (exec --labels); none: the whole tier.
labels=()
[ -n "${LABELS}" ] && labels=(--labels "${LABELS}")
rm -rf "results/shard-${SHARD}"
# The profile, not only its module: exec then runs with the profile's env and python_path,
# as the curation did.
.venv/bin/testcurator exec --config "backend/${CONFIG_DIR}" --torch-root pytorch --device "${DEVICE}" \
  --backend "backend/${BACKEND_PROFILE}" --shard "${SHARD}/${SHARDS}" --tier "${TIER}" "${labels[@]}" "${durations[@]}" \
  --out "results/shard-${SHARD}" -q <<exec_args>>
rc=$?
echo "rc=${rc}" >> "${GITHUB_OUTPUT}"
echo "exec exit code ${rc}"
