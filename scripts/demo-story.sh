# The demo's story, shared by scripts/demo-cluster.sh (the stand-in) and
# scripts/demo-real-cluster.sh (a real control plane): pods created with
# kubectl in team-a and ml-research against deploy/examples/quotas. Source it
# from a script that defines say and run.

demo_pod() { # demo_pod NAME NAMESPACE MODEL LIMITS-YAML
    cat <<P
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: $2
  annotations: {gpuquota.io/gpu-model: $3}
spec:
  containers:
    - name: main
      image: registry.example/ml:1
      resources: {limits: $4}
P
}
# demo_story: every create of the story, each with what the reader should expect.
demo_story() {
    say "pods created with kubectl in team-a (quota 64Gi; containers 2Gi..20Gi, default 8Gi; A100 only)"
    echo "-- a quarter of an A100-80GB:"
    demo_pod notebook team-a a100-80gb '{nvidia.com/gpu: "0.25"}' | run kubectl create -f -
    echo "-- one GPU with no amount: the GPULimitRange default makes it an 8Gi slice:"
    demo_pod trainer team-a a100-80gb '{nvidia.com/gpu: 1}' | run kubectl create -f -
    echo "-- 16Gi of GPU memory:"
    demo_pod inference team-a a100-80gb '{gpuquota.io/gpu-memory: 16Gi}' | run kubectl create -f -
    echo "-- 24Gi in one container is above the limit range's 20Gi:"
    demo_pod big team-a a100-80gb '{gpuquota.io/gpu-memory: 24Gi}' | run kubectl create -f -
    echo "-- an L4 is not an allowed model in team-a:"
    demo_pod l4 team-a l4 '{nvidia.com/gpu: "0.5"}' | run kubectl create -f -
    echo "-- 20Gi more takes team-a to 64Gi (allowed: used + request <= hard):"
    demo_pod last team-a a100-80gb '{gpuquota.io/gpu-memory: 20Gi}' | run kubectl create -f -
    echo "-- and 2Gi more is over the quota:"
    demo_pod over team-a a100-80gb '{gpuquota.io/gpu-memory: 2Gi}' | run kubectl create -f -
    echo "-- four whole H100s in ml-research (tenant ml: 512Gi, 8 GPUs):"
    demo_pod train-4x ml-research h100-80gb '{nvidia.com/gpu: 4}' | run kubectl create -f -
}
