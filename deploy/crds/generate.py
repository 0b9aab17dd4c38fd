#!/usr/bin/env python3
"""Generate the gpuquota CRDs (deploy/crds/*.yaml) from one description.

GPUQuota and GPUTenantQuota share their hard/used/reservations schemas, and
every quantity field carries the same pattern and CEL rule; writing them once
here keeps the three files from drifting apart. Plain YAML is emitted (no
anchors), so kubectl, kustomize and any YAML tool read it the same way.

  deploy/crds/generate.py           rewrite the files next to this script
  deploy/crds/generate.py --check   exit 1 if a file is out of date
"""
import json
import os
import re
import sys

GROUP = "gpuquota.io"
# kubectl expands a category before it looks up a resource, so the category
# must not be the singular, plural or short name of any resource: with
# "gpuquota", `kubectl get gpuquota NAME` listed all three kinds and failed.
CATEGORY = "gpuquota-all"
VERSION = "v1alpha1"

# Kubernetes' resource.Quantity grammar, as the apiserver's own OpenAPI uses it.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


def quantity(description, status=False):
    """A quantity field. maxLength bounds the CEL cost estimate. Status fields
    (written by gpuquota only, always as strings) are plain strings with the
    pattern and no CEL: the int-or-string anyOf and the rule cost
    kube-apiserver CPU at every status write (a GPUTenantQuota status listing
    100 namespaces: 15.7-17.3 ms a write as int-or-string, 11.8-13.0 ms as
    string; docs/performance.md), and 65536 reservations cost nothing in CEL."""
    if status:
        return {
            "description": description,
            "type": "string",
            "pattern": QUANTITY_PATTERN,
            "maxLength": 64,
        }
    q = {
        "description": description,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
        "pattern": QUANTITY_PATTERN,
        "maxLength": 64,
    }
    q["x-kubernetes-validations"] = [
        {
            # isInteger() is false for large binary-suffixed values
            # (100Ti, 100000Gi) that Kubernetes keeps as decimals rather
            # than int64: an integer followed by a binary suffix is whole.
            "rule": "isQuantity(string(self)) && sign(quantity(string(self))) >= 0"
            " && (quantity(string(self)).isInteger()"
            " || string(self).matches('^[+]?[0-9]+[KMGTPE]i$'))",
            "message": "must be a whole, non-negative quantity such as 64Gi or 8",
            "messageExpression": "'must be a whole, non-negative quantity such as 64Gi or 8, not '"
            " + string(self)",
        }
    ]
    return q


def amounts(description, status=False):
    return {
        "description": description,
        "type": "object",
        "properties": {
            "gpu-memory": quantity("Bytes of GPU memory, e.g. 64Gi.", status),
            "gpu-pods": quantity("Pods using any GPU.", status),
            "gpus": quantity("Whole exclusive GPUs.", status),
        },
    }


def memory_only(description):
    return {
        "description": description,
        "type": "object",
        "properties": {"gpu-memory": quantity("Bytes of GPU memory, e.g. 20Gi.")},
    }


HARD = amounts(
    "Hard limits per key. A missing key is unlimited; an explicit 0 blocks every pod "
    "that charges that key."
)

# Catalog model names as spec.models keys them (quota/crd.c model_name_ok).
MODEL_NAME_RULE = "^[a-z0-9._-]{1,63}$"


def models(description, status=False):
    """A map from catalog model name to the keys of hard. Bounded, so the CEL
    rules on its values stay inside the cost budget."""
    m = {
        "description": description,
        "type": "object",
        "maxProperties": 32,
        "additionalProperties": amounts(
            "What the pods pinned to this model use, in the units of spec.models." if status
            else "Limits on pods pinned to this model.", status),
    }
    if not status:
        m["x-kubernetes-validations"] = [
            {
                "rule": "self.all(k, k.matches('%s'))" % MODEL_NAME_RULE,
                "message": "model names are catalog names: lower-case letters, digits, "
                "'-', '.', '_', at most 63 characters",
            }
        ]
    return m


MODELS = models(
    "Limits per GPU model (catalog name, e.g. h100-80gb), beside spec.hard: a pod pinned "
    "to a listed model is charged against that model's limits as well. With any model "
    "listed, a GPU pod must be pinned to a model (the mutating webhook pins it)."
)

SCOPES = {
    "description": "Terminating (spec.activeDeadlineSeconds >= 0) or NotTerminating.",
    "type": "array",
    "maxItems": 2,
    "items": {"type": "string", "enum": ["Terminating", "NotTerminating"]},
    "x-kubernetes-validations": [
        {
            "rule": "!(self.exists(s, s == 'Terminating') && self.exists(s, s == 'NotTerminating'))",
            "message": "conflicting scopes Terminating and NotTerminating",
        }
    ],
}

VALUES_RULE = {
    "rule": "self.operator in ['In', 'NotIn'] ? has(self.values) && size(self.values) > 0"
    " : !has(self.values) || size(self.values) == 0",
    "message": "values must be given for In and NotIn and omitted for Exists and DoesNotExist",
}


def choice(values, default, description=None):
    """A string that is one of values, default when not set."""
    schema = {"description": description} if description else {}
    schema.update({"type": "string", "enum": values, "default": default})
    return schema


def requirement(key_name, key_schema):
    return {
        "type": "object",
        "required": [key_name, "operator"],
        "properties": {
            key_name: key_schema,
            "operator": {"type": "string", "enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
            "values": {
                "type": "array",
                "maxItems": 256,
                "items": {"type": "string", "maxLength": 253},
            },
        },
        "x-kubernetes-validations": [VALUES_RULE],
    }


SCOPE_SELECTOR = {
    "description": "Matches pods by priority class, as ResourceQuota's scopeSelector.",
    "type": "object",
    "properties": {
        "matchExpressions": {
            "type": "array",
            "maxItems": 64,
            "items": requirement("scopeName", {"type": "string", "enum": ["PriorityClass"]}),
        }
    },
}

NAMESPACE_SELECTOR = {
    "description": "metav1.LabelSelector over namespace labels; {} selects every namespace.",
    "type": "object",
    "properties": {
        "matchLabels": {
            "type": "object",
            "maxProperties": 64,
            "additionalProperties": {"type": "string", "maxLength": 63},
        },
        "matchExpressions": {
            "type": "array",
            "maxItems": 64,
            "items": requirement("key", {"type": "string", "minLength": 1, "maxLength": 317}),
        },
    },
}

RESERVATIONS = {
    "description": "Charges of admitted pods the controller has not counted yet; each lapses "
    "at `expires`. Also one record per shared ResourceClaim the quota charges.",
    "type": "array",
    "maxItems": 65536,
    # atomic, not a map keyed by key: kube-apiserver would otherwise track
    # every reservation field by field in managedFields, which made each
    # status write of 30 reservations cost it 13-14 ms of CPU against 7-9
    # (docs/performance.md). Keys stay unique because only gpuquota writes
    # status and every writer adds a key at most once; the controller drops
    # a repeated key (ctl_reconcile).
    "x-kubernetes-list-type": "atomic",
    "items": {
        "type": "object",
        "required": ["key", "namespace", "pod", "gpu-memory", "gpus", "gpu-pods", "expires"],
        "properties": {
            "key": {
                "description": "The pod's metadata.uid, else the admission uid.",
                "type": "string",
                "minLength": 1,
                "maxLength": 253,
            },
            "namespace": {"type": "string", "maxLength": 63},
            "pod": {
                "description": "Name, or generateName when the name is not known yet.",
                "type": "string",
                "maxLength": 253,
            },
            "gpu-memory": quantity("Bytes of GPU memory charged.", status=True),
            "gpus": quantity("Whole exclusive GPUs charged.", status=True),
            "gpu-pods": quantity("Pods charged (0 or 1).", status=True),
            "expires": {"type": "string", "format": "date-time"},
            "model": {
                "description": "The GPU model the pod is pinned to, when it is.",
                "type": "string",
                "maxLength": 63,
            },
            "claim": {
                "description": "A ResourceClaim shared by pods, charged once: key is its uid, "
                "pod its name, the amounts its devices.",
                "type": "boolean",
            },
            "claims": {
                "description": "A pod's reservation: the uids of the shared ResourceClaims it "
                "names; they stay charged while the reservation is kept.",
                "type": "array",
                "maxItems": 32,
                "items": {"type": "string", "minLength": 1, "maxLength": 128},
            },
            "counted": {
                "description": "The controller counts this claim in `used` (some counted pod "
                "names it); it adds nothing more and never expires.",
                "type": "boolean",
            },
            "borrowing": {
                "description": "A queued pod admitted on capacity its quota borrows from its "
                "cohort: it is marked gpuquota.io/borrowing when ungated. On a claim record: the "
                "claim was charged for such a pod, and every pod naming it is a borrower.",
                "type": "boolean",
            },
            "escrow": {
                "description": "Room webhook replicas hold in escrow: hold is free room one "
                "replica took to admit pods against without a write each, want asks holders to "
                "give theirs back, admitted is a pod admitted on a hold, written when the hold "
                "was given back. docs/validating-webhook.md, Escrow.",
                "type": "string",
                "enum": ["hold", "want", "admitted"],
            },
        },
    },
}

CONDITIONS = {
    "type": "array",
    "maxItems": 16,
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
    "items": {
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "type": {"type": "string", "maxLength": 316},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "reason": {"type": "string", "maxLength": 1024},
            "message": {"type": "string", "maxLength": 32768},
        },
    },
}


WHEN_EXCEEDED = choice(
    ["Deny", "Queue"],
    "Deny",
    "What happens to a pod that does not fit: Deny (refused at creation, as "
    "ResourceQuota does) or Queue (it waits behind the scheduling gate gpuquota.io/quota "
    "until it fits). docs/queueing.md.",
)

QUEUEING_STRATEGY = choice(
    ["StrictFIFO", "BestEffortFIFO"],
    "BestEffortFIFO",
    "Order of the queue when whenExceeded is Queue: StrictFIFO (the head "
    "of the line waits and nobody passes it) or BestEffortFIFO (a pod behind that fits "
    "may pass one that does not). Both order by pod priority, then creation time.",
)

PREEMPTION = {
    "description": "What a queued pod that does not fit may do to pods already admitted "
    "(Kueue's names; docs/queueing.md, Preemption). withinQuota: Never (the default: it "
    "waits), LowerPriority (evict pods of lower priority that this quota counts), "
    "LowerOrNewerEqualPriority (also pods of equal priority created after it). "
    "reclaimWithinCohort (a GPUQuota that lends): Never (the default), LowerPriority or Any "
    "of the pods other GPUQuotas of its GPUTenantQuota run on what they borrowed from it. "
    "Victims are evicted through the Eviction API, so PodDisruptionBudgets hold.",
    "type": "object",
    "properties": {
        "withinQuota": choice(["Never", "LowerPriority", "LowerOrNewerEqualPriority"], "Never"),
        "reclaimWithinCohort": choice(["Never", "LowerPriority", "Any"], "Never"),
    },
}

BORROWING_LIMIT = amounts(
    "How far above hard this GPUQuota may go, per key, on what the other GPUQuotas of its "
    "GPUTenantQuota (its cohort) leave unused; a key not set: never above hard. Without it "
    "the quota never borrows. Pods admitted so are marked gpuquota.io/borrowing and are the "
    "first reclaimed. docs/queueing.md, Borrowing."
)

LENDING_LIMIT = amounts(
    "How much of its unused share this GPUQuota lends to the other GPUQuotas of its cohort, "
    "per key; a key not set: all of it."
)


FAIR_SHARING = {
    "description": "Fair sharing between the borrowers of a cohort (Kueue's fairSharing): "
    "when several compete for what the cohort lends, the one whose dominant share (the "
    "most, over gpu-memory and gpus, of what it uses above hard over what the cohort "
    "lends in all) divided by weight is lowest is served first. docs/queueing.md, Borrowing.",
    "type": "object",
    "properties": {
        "weight": {
            "description": "A non-negative quantity, default 1; 0: served after every other "
            "borrower.",
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
            "pattern": QUANTITY_PATTERN,
            "maxLength": 64,
            "x-kubernetes-validations": [
                {
                    "rule": "isQuantity(string(self)) && sign(quantity(string(self))) >= 0"
                    " && quantity(string(self)).compareTo(quantity('1G')) <= 0",
                    "message": "must be a non-negative quantity of at most 1G such as 1, 3 "
                    "or 0.5",
                }
            ],
        }
    },
}

COHORT = {
    "description": "A cohort shared with other GPUTenantQuotas: tenants naming the same one "
    "lend their unused hard to each other (at most lendingLimit) and borrow above hard (at "
    "most borrowingLimit). A DNS-1123 label. docs/queueing.md, Borrowing.",
    "type": "string",
    "minLength": 1,
    "maxLength": 63,
    "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
}

TENANT_BORROWING_LIMIT = amounts(
    "With spec.cohort: how far above hard the tenant as a whole may go, per key, on what "
    "the other tenants of its cohort leave unused; a key not set: never above hard."
)

TENANT_LENDING_LIMIT = amounts(
    "With spec.cohort: how much of its unused hard the tenant lends to the other tenants "
    "of its cohort, per key; a key not set: all of it."
)


def quota_status(tenant):
    props = {
        "observedGeneration": {"type": "integer", "format": "int64"},
        "hard": amounts("spec.hard as last enforced.", status=True),
        "used": amounts("Usage recounted from pods.", status=True),
        "usedByModel": models("Usage per model of spec.models, recounted from pods.", status=True),
    }
    if not tenant:
        props["borrowed"] = amounts(
            "A GPUQuota with spec.borrowingLimit: what it uses above hard, borrowed from the "
            "other GPUQuotas of its GPUTenantQuota.",
            status=True,
        )
        props["lent"] = amounts(
            "A GPUQuota of a cohort: what of its unused share (hard - used, at most "
            "spec.lendingLimit) the cohort's borrowers use now, the borrowed amounts shared "
            "out among lenders pro rata of what each leaves unused (docs/queueing.md).",
            status=True,
        )
    else:
        props["borrowed"] = amounts(
            "A GPUTenantQuota with spec.cohort and spec.borrowingLimit: what it uses above "
            "hard, borrowed from the other tenants of its cohort. Without spec.cohort, a "
            "GPUTenantQuota that is a cohort: what its GPUQuotas borrow in all.",
            status=True,
        )
        props["lent"] = amounts(
            "A GPUTenantQuota with spec.cohort: what of its unused hard (at most "
            "spec.lendingLimit) the other tenants of its cohort use now, shared out as for "
            "GPUQuotas (docs/queueing.md). Without spec.cohort, a GPUTenantQuota that is a "
            "cohort: what its GPUQuotas lend in all.",
            status=True,
        )
    if tenant:
        props["namespaces"] = {
            "description": "Usage per namespace, sorted by namespace.",
            "type": "array",
            "maxItems": 4096,
            # atomic for the reason given at RESERVATIONS; the controller
            # writes the whole list from its recount, one item per namespace.
            "x-kubernetes-list-type": "atomic",
            "items": {
                "type": "object",
                "required": ["namespace"],
                "properties": {
                    "namespace": {"type": "string", "maxLength": 63},
                    "used": amounts("Usage of this namespace.", status=True),
                },
            },
        }
    props["queued"] = amounts(
        "What pods waiting behind the scheduling gate gpuquota.io/quota would charge.", status=True
    )
    props["queuedPods"] = {
        "description": "Pods waiting behind the scheduling gate gpuquota.io/quota.",
        "type": "integer",
        "format": "int64",
        "minimum": 0,
    }
    props["reservations"] = RESERVATIONS
    props["conditions"] = CONDITIONS
    return {"description": "Written by gpuquota only.", "type": "object", "properties": props}


def quota_columns():
    cols = []
    for key, title in (("gpu-memory", "Mem"), ("gpus", "GPUs"), ("gpu-pods", "Pods")):
        for side, path in (("Hard", "spec.hard"), ("Used", "status.used")):
            cols.append(
                {
                    "name": "%s-%s" % (side, title),
                    "type": "string",
                    "jsonPath": ".%s.%s" % (path, key),
                    "description": "%s %s" % (path, key),
                }
            )
    cols.append(
        {
            "name": "Queued",
            "type": "integer",
            "jsonPath": ".status.queuedPods",
            "description": "Pods waiting behind the scheduling gate gpuquota.io/quota",
        }
    )
    cols.append(
        {
            "name": "Queued-Mem",
            "type": "string",
            "jsonPath": ".status.queued.gpu-memory",
            "description": "gpu-memory the queued pods would charge",
        }
    )
    # Borrowing is opt-in and the default table already has ten columns:
    # what a quota borrows and lends shows with -o wide.
    for name, member in (("Borrowed", "borrowed"), ("Lent", "lent")):
        cols.append(
            {
                "name": name,
                "type": "string",
                "priority": 1,
                "jsonPath": ".status.%s.gpu-memory" % member,
                "description": "gpu-memory %s in the cohort (status.%s)" % (member, member),
            }
        )
    cols.append(
        {
            "name": "Strategy",
            "type": "string",
            "priority": 1,
            "jsonPath": ".spec.whenExceeded",
            "description": "What happens to a pod that does not fit: Deny or Queue",
        }
    )
    # Ready is False with reason InvalidSpec when spec.hard cannot be enforced
    # as written (every GPU pod it governs is then denied); -o wide adds why.
    cols.append(
        {
            "name": "Ready",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
            "description": "Whether the quota is enforced as written",
        }
    )
    cols.append(
        {
            "name": "Reason",
            "type": "string",
            "priority": 1,
            "jsonPath": '.status.conditions[?(@.type=="Ready")].reason',
            "description": "Why the quota is or is not Ready",
        }
    )
    cols.append({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
    return cols


def root(spec, status=None, spec_rules=None):
    if spec_rules:
        spec["x-kubernetes-validations"] = spec_rules
    props = {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": spec,
    }
    if status:
        props["status"] = status
    return {"type": "object", "required": ["spec"], "properties": props}


def crd(kind, plural, short, scope, schema, columns=None, status=True):
    version = {"name": VERSION, "served": True, "storage": True}
    if status:
        version["subresources"] = {"status": {}}
    if columns:
        version["additionalPrinterColumns"] = columns
    version["schema"] = {"openAPIV3Schema": schema}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "%s.%s" % (plural, GROUP)},
        "spec": {
            "group": GROUP,
            "scope": scope,
            "names": {
                "kind": kind,
                "listKind": kind + "List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": [short],
                "categories": [CATEGORY],
            },
            "versions": [version],
        },
    }


# The spec fields a GPUQuota and a GPUTenantQuota share.
QUOTA_SPEC = {
    "hard": HARD,
    "models": MODELS,
    "scopes": SCOPES,
    "scopeSelector": SCOPE_SELECTOR,
    "whenExceeded": WHEN_EXCEEDED,
    "queueingStrategy": QUEUEING_STRATEGY,
    "preemption": PREEMPTION,
    "fairSharing": FAIR_SHARING,
}

GPUQUOTA = crd(
    "GPUQuota",
    "gpuquotas",
    "gq",
    "Namespaced",
    root(
        {
            "type": "object",
            "properties": {
                **QUOTA_SPEC,
                "borrowingLimit": BORROWING_LIMIT,
                "lendingLimit": LENDING_LIMIT,
            },
        },
        quota_status(False),
    ),
    quota_columns(),
)

GPUTENANTQUOTA = crd(
    "GPUTenantQuota",
    "gputenantquotas",
    "gtq",
    "Cluster",
    root(
        {
            "type": "object",
            "properties": {
                "namespaces": {
                    "description": "Namespaces of the tenant (either this or namespaceSelector "
                    "matching is enough).",
                    "type": "array",
                    "maxItems": 4096,
                    "items": {"type": "string", "minLength": 1, "maxLength": 63},
                },
                "namespaceSelector": NAMESPACE_SELECTOR,
                **QUOTA_SPEC,
                "cohort": COHORT,
                "borrowingLimit": TENANT_BORROWING_LIMIT,
                "lendingLimit": TENANT_LENDING_LIMIT,
            },
        },
        quota_status(True),
        [
            {
                "rule": "has(self.namespaces) || has(self.namespaceSelector)",
                "message": "a GPUTenantQuota needs namespaces or namespaceSelector",
            }
        ],
    ),
    quota_columns(),
)


def mem(side):
    return "quantity(string(self.%s.gpu__dash__memory))" % side


def order_rule(lo, hi):
    has = "has(self.{0}) && has(self.{0}.gpu__dash__memory)"
    return {
        "rule": "!(%s && %s) || %s.compareTo(%s) <= 0"
        % (has.format(lo), has.format(hi), mem(lo), mem(hi)),
        "message": "%s gpu-memory must be less than or equal to %s gpu-memory" % (lo, hi),
    }


LIMIT_ITEM = {
    "type": "object",
    "required": ["type"],
    "properties": {
        "type": {"type": "string", "enum": ["Container", "Pod"]},
        "min": memory_only("Least gpu-memory per Container (its total charge) or per Pod."),
        "max": memory_only("Most gpu-memory per Container (its total charge) or per Pod."),
        "default": memory_only(
            "Slice size given to each GPU of a container asking for whole GPUs without an "
            "amount (type Container only)."
        ),
        "maxGPUs": {
            "description": "Most GPU devices per container, or held by the pod at once.",
            "type": "integer",
            "format": "int64",
            "minimum": 0,
        },
        "allowedModels": {
            "description": "GPU models pods may use; a pod without a model is denied when set.",
            "type": "array",
            "maxItems": 64,
            "items": {"type": "string", "minLength": 1, "maxLength": 128},
        },
    },
    "x-kubernetes-validations": [
        {
            "rule": "self.type == 'Container' || !has(self.default)",
            "message": "default may only be set for type Container",
        },
        order_rule("min", "max"),
        order_rule("min", "default"),
        order_rule("default", "max"),
        {
            "rule": "!has(self.default) || !has(self.default.gpu__dash__memory) || sign("
            + mem("default")
            + ") > 0",
            "message": "default gpu-memory must be greater than 0",
        },
    ],
}

GPULIMITRANGE = crd(
    "GPULimitRange",
    "gpulimitranges",
    "glr",
    "Namespaced",
    root(
        {
            "type": "object",
            "required": ["limits"],
            "properties": {"limits": {"type": "array", "maxItems": 64, "items": LIMIT_ITEM}},
        }
    ),
    [
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
    status=False,
)

HEADERS = {
    "GPUQuota": "GPUQuota: a namespace's GPU budget.",
    "GPUTenantQuota": "GPUTenantQuota: a GPU budget shared by a set of namespaces.",
    "GPULimitRange": "GPULimitRange: per-container and per-pod GPU bounds and defaults.",
}

# --- a small YAML emitter (block style, stable order) -----------------------

PLAIN = re.compile(r"^[A-Za-z_/][A-Za-z0-9_./ -]*$")
RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def scalar(v):
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    s = str(v)
    if PLAIN.match(s) and s.lower() not in RESERVED and not s.endswith(" ") and ": " not in s:
        return s
    return json.dumps(s)


def emit(v, indent, out):
    pad = "  " * indent
    if isinstance(v, dict):
        if not v:
            out[-1] += " {}"
            return
        for k, x in v.items():
            key = scalar(k)
            if isinstance(x, (dict, list)) and x:
                out.append("%s%s:" % (pad, key))
                emit(x, indent + 1, out)
            elif isinstance(x, dict):
                out.append("%s%s: {}" % (pad, key))
            elif isinstance(x, list):
                out.append("%s%s: []" % (pad, key))
            else:
                out.append("%s%s: %s" % (pad, key, scalar(x)))
    elif isinstance(v, list):
        for x in v:
            if isinstance(x, dict) and x:
                sub = []
                emit(x, indent + 1, sub)
                first = sub[0].lstrip()
                out.append("%s- %s" % (pad, first))
                out.extend(sub[1:])
            elif isinstance(x, list) and x:
                out.append("%s-" % pad)
                emit(x, indent + 1, out)
            else:
                out.append("%s- %s" % (pad, scalar(x)))


def render(obj):
    kind = obj["spec"]["names"]["kind"]
    lines = [
        "# " + HEADERS[kind],
        "# Generated by deploy/crds/generate.py from one description; edit that, not this.",
        "# Semantics: docs/quota-semantics.md.",
    ]
    emit(obj, 0, lines)
    return "\n".join(lines) + "\n"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    check = "--check" in sys.argv[1:]
    stale = []
    for obj in (GPUQUOTA, GPUTENANTQUOTA, GPULIMITRANGE):
        name = "%s_%s.yaml" % (GROUP, obj["spec"]["names"]["plural"])
        path = os.path.join(here, name)
        text = render(obj)
        if check:
            try:
                with open(path) as f:
                    if f.read() != text:
                        stale.append(name)
            except OSError:
                stale.append(name)
        else:
            with open(path, "w") as f:
                f.write(text)
    if stale:
        print("out of date (run deploy/crds/generate.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
