#!/usr/bin/env bash
# Queue strategies and pod groups on the real control plane
# (docs/queueing.md):
#   1. BestEffortFIFO lets a small pod pass a big one that does not fit;
#      StrictFIFO keeps it behind the head of the line;
#   2. a group of 4 stays gated with 3 members, and with 4 that do not fit,
#      then all 4 start together when room frees;
#   3. a group bigger than hard, and a member whose size disagrees with its
#      group's members, are refused at creation with a clear message; a
#      member that agrees is admitted to the queue.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
NSB=e2e-queue-best NSS=e2e-queue-strict NSG=e2e-queue-group
trap 'kubectl delete namespace $NSB $NSS $NSG --wait=false >/dev/null 2>&1' EXIT

# qquota NS HARD STRATEGY
qquota() { quota "$1" team "{gpu-memory: $2}" 'whenExceeded: Queue' "queueingStrategy: $3"; }
# mk NS NAME MEMORY [EXTRA-YAML-UNDER-METADATA]
mk() { gpu_pod "$2" "$3" "${4:-}" | kubectl -n "$1" create -f - 2>&1; }
gates() { kubectl -n "$1" get pod "$2" -o json | jq -r '[.spec.schedulingGates[]?.name] | join(",")'; }
ungated() { [[ -z $(gates "$1" "$2") ]]; }
gone() { kubectl -n "$1" delete pod "$2" --grace-period=0 --force >/dev/null 2>&1; }
queued_is() { [[ $(kubectl -n "$1" get gq team -o jsonpath='{.status.queuedPods}') == "$2" ]]; }
seen() { gpu_pod probe 1Gi | kubectl -n "$1" create --dry-run=server -o json -f - | jq -e '.spec.schedulingGates'; }

# ------------------------------------------------ strict vs best effort
for mode in best strict; do
    if [[ $mode == best ]]; then n=$NSB strat=BestEffortFIFO; else n=$NSS strat=StrictFIFO; fi
    ns "$n"
    qquota "$n" 10Gi "$strat"
    eventually 15 seen "$n"
    mk "$n" filler 4Gi >/dev/null
    eventually 10 ungated "$n" filler
    mk "$n" big 8Gi >/dev/null
    next_second # creationTimestamp counts whole seconds
    mk "$n" small 4Gi >/dev/null
    eventually 15 queued_is "$n" 2 # both seen by the controller
done
eventually 10 ungated "$NSB" small
check "BestEffortFIFO: the small pod passes the big one" "/gpuquota.io/quota" \
    "$(gates "$NSB" small)/$(gates "$NSB" big)"
sleep 2 # the controller has passed over both queues several times since
check "StrictFIFO: the small pod waits behind the big one" "gpuquota.io/quota/gpuquota.io/quota" \
    "$(gates "$NSS" small)/$(gates "$NSS" big)"
ev() { kubectl -n "$1" get events --field-selector "involvedObject.name=$2,reason=Queued" -o jsonpath='{.items[*].message}'; }
has_ev() { [[ -n $(ev "$1" "$2") ]]; }
eventually 10 has_ev "$NSS" small
check_match "and its Event says it waits in line" \
    'waiting in line behind 1 pod\(s\) of quota team \(StrictFIFO\) that do not fit yet' \
    "$(ev "$NSS" small)"
gone "$NSS" filler
eventually 10 ungated "$NSS" big
check "StrictFIFO: the head goes first once it fits" "/gpuquota.io/quota" \
    "$(gates "$NSS" big)/$(gates "$NSS" small)"

# ---------------------------------------------------------- pod groups
ns "$NSG"
qquota "$NSG" 32Gi BestEffortFIFO
eventually 15 seen "$NSG"
member() { echo "  labels: {gpuquota.io/pod-group: $1}
  annotations: {gpuquota.io/pod-group-size: \"$2\"}"; }
check_match "a group bigger than hard is refused at creation" \
    'denied the request: pod group big of 5 pods asks for gpu-memory=40Gi, more than quota team allows at all \(gpu-memory=32Gi\): it would wait forever' \
    "$(mk "$NSG" big-0 8Gi "$(member big 5)")"
check_match "a group size that is not a number is refused" \
    'denied the request: pod group odd: annotation gpuquota.io/pod-group-size "four": must be a whole number from 1 to 4096' \
    "$(mk "$NSG" odd-0 8Gi "$(member odd four)")"
mk "$NSG" filler 8Gi >/dev/null
eventually 10 ungated "$NSG" filler
for i in 0 1 2; do mk "$NSG" train-$i 8Gi "$(member train 4)" >/dev/null; done
eventually 15 queued_is "$NSG" 3
sleep 1
check "a group of 4 stays gated with 3 members (though 3 would fit)" \
    "gpuquota.io/quota gpuquota.io/quota gpuquota.io/quota" \
    "$(gates "$NSG" train-0) $(gates "$NSG" train-1) $(gates "$NSG" train-2)"
eventually 10 has_ev "$NSG" train-2
check_match "the last member's Event says the group waits for members" \
    'pod group e2e-queue-group/train waits for its members: 3 of 4 queued, 0 running' "$(ev "$NSG" train-2)"
# Members arriving do not make the waiting ones post again (a group of n
# members would post n^2 Events).
evn() { kubectl -n "$1" get events --field-selector "involvedObject.name=$2,reason=Queued" -o json | jq '.items | length'; }
check "the first member has one Queued Event, not one per arrival" "1" "$(evn "$NSG" train-0)"
check_match "a member disagreeing on the size is refused at creation, naming a member" \
    'denied the request: pod group train: this pod says gpuquota.io/pod-group-size=3 but member train-0 says 4' \
    "$(mk "$NSG" train-x 8Gi "$(member train 3)")"
mk "$NSG" train-3 8Gi "$(member train 4)" >/dev/null
eventually 15 queued_is "$NSG" 4
sleep 1
check "with 4 members that do not fit, all 4 stay gated" "4" \
    "$(kubectl -n "$NSG" get pods -l gpuquota.io/pod-group=train -o json | jq '[.items[] | select(.spec.schedulingGates)] | length')"
gone "$NSG" filler
all_in() { [[ $(kubectl -n "$NSG" get pods -l gpuquota.io/pod-group=train -o json | jq '[.items[] | select(.spec.schedulingGates | not)] | length') == 4 ]]; }
eventually 10 all_in
check "when room frees all 4 start together" "0" \
    "$(kubectl -n "$NSG" get pods -l gpuquota.io/pod-group=train -o json | jq '[.items[] | select(.spec.schedulingGates)] | length')"
full() { [[ $(used "$NSG" team gpu-memory) == 32Gi ]]; }
eventually 15 full
check "charged in full, never above hard" "32Gi" "$(used "$NSG" team gpu-memory)"
# A restarted worker queues alone: the other 3 still run.
gone "$NSG" train-2
mk "$NSG" train-2 8Gi "$(member train 4)" >/dev/null
eventually 10 ungated "$NSG" train-2
check "a replacement member is admitted alone while the rest of its group runs" "" \
    "$(gates "$NSG" train-2)"
# A second group: its first member sets the size, the next must agree.
check_match "the first member of a group of 3 is created" "created" \
    "$(mk "$NSG" pair-0 1Gi "$(member pair 3)")"
check_match "a member saying 4 is refused with both sizes" \
    'denied the request: pod group pair: this pod says gpuquota.io/pod-group-size=4 but member pair-0 says 3; members of a group must agree on its size' \
    "$(mk "$NSG" pair-1 1Gi "$(member pair 4)")"
check_match "a member saying 3 is created" "created" "$(mk "$NSG" pair-1 1Gi "$(member pair 3)")"
check "and queued behind the gate" "gpuquota.io/quota" "$(gates "$NSG" pair-1)"
# A member that ended no longer speaks for the group.
kubectl -n "$NSG" delete pod pair-0 pair-1 --grace-period=0 --force >/dev/null 2>&1
nopair() { [[ -z $(kubectl -n "$NSG" get pods -l gpuquota.io/pod-group=pair -o name) ]]; }
eventually 15 nopair
check_match "once its members are gone, the group may start over with another size" "created" \
    "$(mk "$NSG" pair-2 1Gi "$(member pair 4)")"
finish
