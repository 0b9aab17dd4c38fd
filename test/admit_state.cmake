# gpuquota admit --state: the validating decision against quotas, limit
# ranges, namespaces and running pods given in files.
set(GQ_STATE ${GQ_TEST_DATA}/state)
set(GQ_STATE_EXAMPLES ${CMAKE_SOURCE_DIR}/deploy/examples/state)

gq_cli_test(admit state_fits_exactly 0
  ARGS --state ${GQ_STATE_EXAMPLES}/cluster.yaml ${GQ_STATE_EXAMPLES}/train-16gi.yaml
  EXPECT "^pod team-a/train-: allowed$" "^quotas: GPUQuota team-a/team-a, GPUTenantQuota ml$")
gq_cli_test(admit state_model_choice 0
  ARGS --state ${GQ_STATE_EXAMPLES}/cluster.yaml ${GQ_STATE_EXAMPLES}/train-choice.yaml
  EXPECT "^pod team-a/train-: allowed$" "gpuquota.io/gpu-model.*l4"
         "gpuquota.io/gpu-model-choices.*a100-80gb,l4")
gq_cli_test(admit state_model_choice_status_ignored 0
  ARGS --state ${GQ_STATE_EXAMPLES}/cluster.yaml ${GQ_STATE}/pod-choice-with-status.yaml
  EXPECT "^pod team-a/train-: allowed$" "gpuquota.io/gpu-model.*l4" "^charge: gpu-memory=6Gi gpus=0 gpu-pods=1$")
gq_cli_test(admit state_exceeds 1
  ARGS --state ${GQ_STATE_EXAMPLES}/cluster.yaml ${GQ_STATE_EXAMPLES}/train-24gi.yaml
  EXPECT "^pod team-a/train-: denied$"
         "^reason: exceeded quota: team-a, requested: gpu-memory=24Gi, used: gpu-memory=48Gi, limited: gpu-memory=64Gi$")
gq_cli_test(admit state_exceeds_json 1
  ARGS -o json --state ${GQ_STATE_EXAMPLES}/cluster.yaml ${GQ_STATE_EXAMPLES}/train-24gi.yaml
  EXPECT "\"allowed\": false" "\"code\": 403," "\"reason\": \"Forbidden\"" "\"message\": \"exceeded quota: team-a,")
gq_cli_test(admit state_fits_json 0
  ARGS -o json --state ${GQ_STATE_EXAMPLES}/cluster.yaml ${GQ_STATE_EXAMPLES}/train-16gi.yaml
  EXPECT "\"quotas\": \"GPUQuota team-a/team-a, GPUTenantQuota ml\"" "\"reservation\": \"gpuquota-admit\"")
gq_cli_test(admit state_limit_range 1
  ARGS --state ${GQ_STATE_EXAMPLES}/cluster.yaml ${GQ_STATE}/pod-team-a-48gi.json
  EXPECT "^reason: maximum gpu-memory usage per Container is 40Gi, but limit is 48Gi$")
gq_cli_test(admit state_tenant_fits 0
  ARGS --state ${GQ_STATE}/tenant.yaml ${GQ_STATE}/pod-ml-b-16gi.json
  EXPECT "^pod ml-b/b-16: allowed$" "^quotas: GPUTenantQuota ml$")
gq_cli_test(admit state_tenant_exceeds 1
  ARGS --state ${GQ_STATE}/tenant.yaml ${GQ_STATE}/pod-ml-b-24gi.json
  EXPECT "^reason: exceeded tenant quota: ml, requested: gpu-memory=24Gi, used: gpu-memory=16Gi, limited: gpu-memory=32Gi$")
# One counting rule (gq_pod_counts) for admit and the controller: a pod past
# its deletion grace, a Succeeded pod and a queued pod do not count.
gq_cli_test(admit state_counting_fits 0
  ARGS --state ${GQ_STATE}/counting.yaml ${GQ_STATE}/pod-ml-b-16gi.json
  EXPECT "^pod ml-b/b-16: allowed$")
gq_cli_test(admit state_counting_exceeds 1
  ARGS --state ${GQ_STATE}/counting.yaml ${GQ_STATE}/pod-ml-b-24gi.json
  EXPECT "^reason: exceeded tenant quota: ml, requested: gpu-memory=24Gi, used: gpu-memory=16Gi, limited: gpu-memory=32Gi$")
gq_cli_test(admit state_two_files 1
  ARGS --state ${GQ_STATE}/tenant.yaml --state ${GQ_STATE_EXAMPLES}/cluster.yaml
       ${GQ_STATE_EXAMPLES}/train-24gi.yaml
  EXPECT "^reason: exceeded quota: team-a,")
gq_cli_test(admit state_tamper 1
  ARGS --state ${GQ_STATE_EXAMPLES}/cluster.yaml ${GQ_STATE}/review-update-tamper.json
  EXPECT "^reason: changing gpuquota.io/ labels and annotations is reserved to gpuquota \\(label gpuquota.io/managed\\)$")
gq_cli_test(admit state_no_quota_needed 0 ARGS ${GQ_STATE}/pod-ml-b-16gi.json EXPECT "^quotas: none$")
gq_cli_test(admit state_require_quota 1
  ARGS --config ${GQ_STATE}/require-quota.yaml ${GQ_STATE}/pod-ml-b-16gi.json
  EXPECT "^reason: insufficient quota to consume: gpu-memory,gpu-pods$")
# DRA claims gpuquota could not price (here: no cluster to read the
# template from) are refused where a quota governs the namespace, admitted
# untouched where none does.
gq_cli_test(admit state_dra_claim_governed 1
  ARGS --state ${GQ_STATE_EXAMPLES}/cluster.yaml ${GQ_TEST_DATA}/pods/dra-claim.json
  EXPECT "^pod team-a/dra: denied$"
         "^reason: spec.resourceClaims\\[0\\] \"gpu\" \\(resourceClaimTemplateName \"single-gpu\"\\): gpuquota cannot tell which GPUs the pod's DRA claims hold, so namespace team-a, governed by GPUQuota team-a/team-a, does not admit it; ask for GPUs through a ResourceClaimTemplate")
gq_cli_test(admit state_dra_claim_ungoverned 0 ARGS ${GQ_TEST_DATA}/pods/dra-claim.json
  EXPECT "^pod team-a/dra: allowed$" "^quotas: none$" "^patch: none \\(admitted unchanged\\)$")
# A GPU is never free: whole GPUs of unknown model are charged as the
# catalog's largest (h200, 141Gi), so a quota on gpu-memory alone holds.
gq_cli_test(admit state_whole_unknown_model 1
  ARGS --state ${GQ_STATE}/memory-quota-team-a.yaml ${GQ_TEST_DATA}/pods/whole-2.json
  EXPECT "^pod team-a/m: denied$"
         "^reason: exceeded quota: memory, requested: gpu-memory=282Gi, used: gpu-memory=0, limited: gpu-memory=64Gi$")
gq_cli_test(admit whole_unknown_model_warning 0 ARGS ${GQ_TEST_DATA}/pods/whole-2.json
  EXPECT "^container trainer \\(app\\): form=whole request=nvidia.com/gpu=2 gpus=2 exclusive memory/gpu=141Gi charged/gpu=141Gi$"
         "^charge: gpu-memory=282Gi gpus=2 gpu-pods=1$"
         "^warning: container trainer: 2 whole GPU\\(s\\) of unknown model charged as h200 \\(141Gi each\\); pin one with gpuquota.io/gpu-model$"
         "\"gpuquota.io/charged\":\"gpu-memory=282Gi,gpus=2,gpu-pods=1\"")
# Zero of any GPU form asks for no GPU: admitted untouched even where
# every GPU pod needs a quota.
gq_cli_test(admit state_zero_every_form 0
  ARGS --config ${GQ_STATE}/require-quota.yaml ${GQ_TEST_DATA}/pods/zero-every-form.json
  EXPECT "^pod team-a/m: allowed$" "^charge: gpu-memory=0 gpus=0 gpu-pods=0$" "^quotas: none$"
         "^patch: none \\(admitted unchanged\\)$")
gq_cli_test(admit state_zero_annotations 0
  ARGS --config ${GQ_STATE}/require-quota.yaml ${GQ_TEST_DATA}/pods/zero-annotations.json
  EXPECT "^charge: gpu-memory=0 gpus=0 gpu-pods=0$" "^patch: none \\(admitted unchanged\\)$")
gq_cli_test(admit state_bad_kind 2 ARGS --state ${GQ_STATE}/bad-kind.yaml ${GQ_STATE}/pod-ml-b-16gi.json
  EXPECT "^gpuquota admit: --state: ConfigMap settings: kind cannot be used as state$")
gq_cli_test(admit state_bad_quota 2 ARGS --state ${GQ_STATE}/bad-quota.yaml ${GQ_STATE}/pod-ml-b-16gi.json
  EXPECT "^gpuquota admit: --state: GPUQuota broken: spec.hard.gpu-memory")
gq_cli_test(admit state_bad_pod 2 ARGS --state ${GQ_STATE}/bad-pod.yaml ${GQ_STATE}/pod-ml-b-16gi.json
  EXPECT "^gpuquota admit: --state: Pod team-a/odd: container \"c\": nvidia.com/gpu \"1.5\" is not valid")
gq_cli_test(admit state_missing 2 ARGS --state ${GQ_STATE}/nope.yaml ${GQ_STATE}/pod-ml-b-16gi.json
  EXPECT "nope.yaml: No such file")
