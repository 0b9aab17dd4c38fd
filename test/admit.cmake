# gpuquota admit: exit status (0 allowed, 1 denied, 2 bad input) and the key
# output lines, over the example pods, the shared AdmissionReview fixture and
# bad inputs. The decision is the mutating webhook's (wh_mutate_review).
set(GQ_EXAMPLES ${CMAKE_SOURCE_DIR}/deploy/examples/pods)

# gq_cli_test(admit NAME STATUS ARGS arg... EXPECT regex...)
gq_cli_test(admit review_fixture 0 ARGS ${GQ_TEST_DATA}/admissionreview-pod-create.json
  EXPECT "^pod ml-research/llm-finetune-0-: allowed$"
         "^model: h100-80gb \\(pinned\\)$"
         "^container trainer \\(app\\): form=whole request=nvidia.com/gpu=8 gpus=8 exclusive memory/gpu=80Gi charged/gpu=80Gi$"
         "^charge: gpu-memory=640Gi gpus=8 gpu-pods=1$")
gq_cli_test(admit review_fixture_patch 0 ARGS ${GQ_TEST_DATA}/admissionreview-pod-create.json
  EXPECT "^patch: 4 operations$"
         "^  add /metadata/labels/gpuquota.io~1managed \"true\"$"
         "^  add /metadata/annotations/gpuquota.io~1admission .*640Gi.*h100-80gb.*NotTerminating"
         "^rewritten pod:$")
gq_cli_test(admit review_fixture_json 0 ARGS -o json ${GQ_TEST_DATA}/admissionreview-pod-create.json
  EXPECT "^  \"allowed\": true,$" "^  \"status\": null,$" "\"gpu-memory\": \"640Gi\"" "\"gpus\": 8,"
         "\"model\": \"h100-80gb\"" "\"op\": \"add\"" "\"gpuquota.io/managed\": \"true\""
         "\"generateName\": \"llm-finetune-0-\"")
gq_cli_test(admit example_fractional 0 ARGS ${GQ_EXAMPLES}/fractional-gpu.yaml
  EXPECT "^model: a100-40gb \\(pinned\\)$"
         "form=fraction request=nvidia.com/gpu=0.5 gpus=1 memory/gpu=20Gi charged/gpu=20Gi"
         "^charge: gpu-memory=20Gi gpus=0 gpu-pods=1$"
         "^warning: container notebook: nvidia.com/gpu 0.5 on a100-40gb -> aliyun.com/gpu-mem 20$"
         "^patch: 8 operations$"
         "^  remove /spec/containers/0/resources/limits/nvidia.com~1gpu$"
         "^  add /spec/containers/0/resources/limits/aliyun.com~1gpu-mem \"20\"$"
         "^            \"aliyun.com/gpu-mem\": \"20\"$")
gq_cli_test(admit example_gpu_memory 0 ARGS ${GQ_EXAMPLES}/gpu-memory.yaml
  EXPECT "^charge: gpu-memory=10Gi gpus=0 gpu-pods=1$")
gq_cli_test(admit example_model_pin_gfd 0 ARGS ${GQ_EXAMPLES}/model-pin-gfd.yaml
  EXPECT "^model: a10 \\(pinned\\)$" "^charge: gpu-memory=6Gi gpus=0 gpu-pods=1$")
gq_cli_test(admit example_whole 0 ARGS ${GQ_EXAMPLES}/whole-gpus.yaml
  EXPECT "^charge: gpu-memory=160Gi gpus=2 gpu-pods=1$")
gq_cli_test(admit example_hami 0 ARGS ${GQ_EXAMPLES}/hami.yaml
  EXPECT "form=hami-memory request=nvidia.com/gpumem=8192,nvidia.com/gpu=1"
         "^charge: gpu-memory=8Gi gpus=0 gpu-pods=1$")
gq_cli_test(admit example_kai 0 ARGS ${GQ_EXAMPLES}/kai.yaml
  EXPECT "form=kai-fraction request=gpu-fraction=0.5" "^charge: gpu-memory=12Gi gpus=0 gpu-pods=1$")
gq_cli_test(admit example_init_sidecar 0 ARGS ${GQ_EXAMPLES}/init-sidecar.yaml
  EXPECT "^container metrics-proxy \\(sidecar\\)" "^container warm-cache \\(init\\)"
         "^charge: gpu-memory=18Gi gpus=0 gpu-pods=1$")
gq_cli_test(admit example_cpu_only 0 ARGS ${GQ_EXAMPLES}/cpu-only.yaml
  EXPECT "^pod web: allowed$" "^charge: gpu-memory=0 gpus=0 gpu-pods=0$"
         "^patch: none \\(admitted unchanged\\)$")
gq_cli_test(admit example_invalid 1 ARGS ${GQ_EXAMPLES}/invalid-1.5-gpus.yaml
  EXPECT "^pod one-and-a-half: denied$"
         "^reason: container \"trainer\": nvidia.com/gpu \"1.5\" is not valid: a GPU fraction must be in \\(0, 1\\] \\(for example \"0.5\" or \"500m\"\\); ask for whole GPUs as an integer$")
gq_cli_test(admit invalid_json 1 ARGS -o json ${GQ_EXAMPLES}/invalid-1.5-gpus.yaml
  EXPECT "\"allowed\": false" "\"code\": 403," "\"reason\": \"Forbidden\"" "\"message\": \"container "
         "^  \"pod\": null,$" "^  \"cost\": null$")
# Caps on what is parsed apply to pods that ask for a GPU only.
gq_cli_test(admit many_containers_no_gpu 0 ARGS ${GQ_TEST_DATA}/pods/too-many-containers.json
  EXPECT "^pod team-a/m: allowed$" "^charge: gpu-memory=0 gpus=0 gpu-pods=0$"
         "^patch: none \\(admitted unchanged\\)$")
gq_cli_test(admit many_containers_gpu 1 ARGS ${GQ_TEST_DATA}/pods/too-many-containers-gpu.json
  EXPECT "^reason: container \"c256\" asks for a GPU and the pod has 257 containers \\(app and init\\); a pod that uses a GPU may have at most 256$")
# gpuquota's label and records written by the pod's author (admit records
# the author in managedFields as kube-apiserver does) never set the charge:
# 4 time-sliced A100 80GB cost 4 whole cards, not the 4Gi the author wrote.
gq_cli_test(admit author_records 0
  ARGS --config ${GQ_TEST_DATA}/mutate/timeslicing.yaml ${GQ_TEST_DATA}/pods/forged-shared-bare.json
  EXPECT "^charge: gpu-memory=320Gi gpus=0 gpu-pods=1$"
         "^  add /metadata/annotations/gpuquota.io~1gpu-requests .*\"memory.*\"80Gi"
         "^  add /metadata/annotations/gpuquota.io~1original-request .*nvidia.com/gpu.shared"
         "^  add /metadata/annotations/gpuquota.io~1charged \"gpu-memory=320Gi,gpus=0,gpu-pods=1\"$")
gq_cli_test(admit unknown_model 1 ARGS ${GQ_TEST_DATA}/pods/unknown-model.json
  EXPECT "^reason: pod annotation gpuquota.io/gpu-model \"a100\" is not a known GPU model")
gq_cli_test(admit unsupported 1 ARGS ${GQ_TEST_DATA}/pods/memory-x2.json
  EXPECT "the aliyun backend cannot split a container over several GPUs")
gq_cli_test(admit config_hami 0
  ARGS --config ${GQ_TEST_DATA}/admit-config-hami.yaml ${GQ_TEST_DATA}/pods/fraction-number-default.json
  EXPECT "^backend: hami \\(memory unit 1Gi\\)$" "^model: a10 \\(default\\)$"
         "^charge: gpu-memory=6Gi gpus=0 gpu-pods=1$")
add_test(NAME admit_stdin
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 0 1 "^pod inference-10gi: allowed$"
                 sh -c "exec \"$0\" admit - <\"$1\"" ${GQ_BIN} ${GQ_EXAMPLES}/gpu-memory.yaml)
# bad input and usage: exit 2
gq_cli_test(admit bad_config 2 ARGS --config ${GQ_TEST_DATA}/admit-config-bad.yaml ${GQ_EXAMPLES}/cpu-only.yaml
  EXPECT "admit-config-bad.yaml:1: backend: unknown backend \"nope\"")
gq_cli_test(admit not_a_pod 2 ARGS ${GQ_TEST_DATA}/not-a-pod.yaml
  EXPECT "not-a-pod.yaml: expected a Pod, found kind Service$")
# The webhook's own decoder refuses an incomplete review (the server: 400).
gq_cli_test(admit review_incomplete 2 ARGS ${GQ_TEST_DATA}/review-not-a-pod.json
  EXPECT "review-not-a-pod.json: request.resource.resource is missing$")
gq_cli_test(admit review_service 0 ARGS ${GQ_TEST_DATA}/mutate/review-service.json
  EXPECT "^Service team-a/s \\(CREATE\\): allowed$" "^patch: none \\(admitted unchanged\\)$")
gq_cli_test(admit review_service_json 0 ARGS -o json ${GQ_TEST_DATA}/mutate/review-service.json
  EXPECT "^  \"cost\": null,$" "\"kind\": \"Service\"")
gq_cli_test(admit review_only 0 ARGS --review-only --uid u-7 ${GQ_EXAMPLES}/gpu-memory.yaml
  EXPECT "^\\{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":\\{\"uid\":\"u-7\","
         "\"namespace\":\"default\",\"operation\":\"CREATE\",\"userInfo\":\\{\"username\":\"gpuquota-admit\"\\},\"object\":\\{\"apiVersion\":\"v1\",\"kind\":\"Pod\"")
gq_cli_test(admit patch_only 0 ARGS -o patch --uid u-7 ${GQ_EXAMPLES}/gpu-memory.yaml
  EXPECT "^\\[\\{\"op\":\"remove\",\"path\":\"/spec/containers/0/resources/limits/gpuquota.io~1gpu-memory\"\\},")
gq_cli_test(admit patch_only_none 0 ARGS -o patch ${GQ_EXAMPLES}/cpu-only.yaml EXPECT "^\\[\\]$")
gq_cli_test(admit a100_selector_trap 0 ARGS ${GQ_TEST_DATA}/mutate/pin-a100-selector.yaml
  EXPECT "^model: a100-40gb \\(pinned\\)$" "^charge: gpu-memory=20Gi gpus=0 gpu-pods=1$")
gq_cli_test(admit a10_annotation_exact 0 ARGS ${GQ_TEST_DATA}/mutate/pin-a10-annotation.yaml
  EXPECT "^charge: gpu-memory=12Gi gpus=0 gpu-pods=1$"
         "\"values\":\\[\"NVIDIA-A10\"\\]\\}\\]\\}\\]\\}\\}\\}$")
gq_cli_test(admit affinity_merged 0 ARGS ${GQ_TEST_DATA}/mutate/affinity-merge.yaml
  EXPECT "^  add /spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchExpressions/- \\{\"key\":\"nvidia.com/gpu.product\",\"operator\":\"In\",\"values\":\\[\"NVIDIA-L4\"\\]\\}$"
         "^  add /spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/1/matchExpressions \\[\\{\"key\":\"nvidia.com/gpu.product\",\"operator\":\"In\",\"values\":\\[\"NVIDIA-L4\"\\]\\}\\]$"
         "^patch: 9 operations$")
# Reinvocation: every example pod under every backend, its own patch applied,
# decided again: no patch.
add_test(NAME admit_reinvocation
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/admit_reinvocation.sh ${GQ_BIN}
                 ${GQ_TEST_DATA}/mutate ${GQ_EXAMPLES})
gq_cli_test(admit bad_patch_file 2 ARGS --patch ${GQ_TEST_DATA}/not-a-pod.yaml ${GQ_EXAMPLES}/gpu-memory.yaml
  EXPECT "gpu-memory.yaml: .*not-a-pod.yaml: ")
gq_cli_test(admit two_documents 2 ARGS ${GQ_TEST_DATA}/two-pods.yaml
  EXPECT "two-pods.yaml: expected one object, found 2 documents$")
gq_cli_test(admit not_yaml 2 ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/yamljson/alias.yaml
  EXPECT "alias.yaml:1: anchors \\(&name\\) are not supported$")
gq_cli_test(admit missing_file 2 ARGS ${GQ_TEST_DATA}/no-such-file.yaml EXPECT "no-such-file.yaml: No such file")
gq_cli_test(admit no_args 2 EXPECT "^usage: gpuquota admit")
gq_cli_test(admit bad_output 2 ARGS -o yaml ${GQ_EXAMPLES}/cpu-only.yaml EXPECT "^usage: gpuquota admit")
gq_cli_test(admit help 0 ARGS --help EXPECT "^usage: gpuquota admit" "exit status: 0 allowed, 1 denied")
