# Manifests the shell tests and demos apply, printed as YAML for
# `kubectl apply -f -`: one spelling of each object, whichever client
# (kubectl on a real control plane, k on the stand-in) applies it.

# limit_range_yaml NS NAME LIMITS: a GPULimitRange; LIMITS is its
# spec.limits as a YAML flow sequence, e.g. '[{type: Container, max: {gpu-memory: 6Gi}}]'.
limit_range_yaml() {
    printf 'apiVersion: gpuquota.io/v1alpha1\nkind: GPULimitRange\nmetadata: {name: %s, namespace: %s}\nspec: {limits: %s}\n' \
        "$2" "$1" "$3"
}

# tenant_quota_yaml NAME LABELS HARD: a GPUTenantQuota over the namespaces
# whose labels match LABELS, e.g. tenant_quota_yaml ml '{team: ml}' '{gpu-memory: 16Gi}'.
tenant_quota_yaml() {
    printf 'apiVersion: gpuquota.io/v1alpha1\nkind: GPUTenantQuota\nmetadata: {name: %s}\n' "$1"
    printf 'spec:\n  namespaceSelector: {matchLabels: %s}\n  hard: %s\n' "$2" "$3"
}

# webhook_config_yaml KIND NAME WEBHOOK CLIENT-CONFIG OPERATIONS [FIELD...]: a
# Mutating- or ValidatingWebhookConfiguration with one webhook for pods, e.g.
# webhook_config_yaml ValidatingWebhookConfiguration v validate.example.com \
#     '{url: "https://127.0.0.1:8443/validate"}' 'CREATE, UPDATE' 'failurePolicy: Fail'
# Each FIELD is one more line of the webhook ("sideEffects: None").
webhook_config_yaml() {
    local field
    printf 'apiVersion: admissionregistration.k8s.io/v1\nkind: %s\nmetadata: {name: %s}\nwebhooks:\n' "$1" "$2"
    printf '  - name: %s\n    clientConfig: %s\n    admissionReviewVersions: [v1]\n' "$3" "$4"
    printf '    rules: [{operations: [%s], apiGroups: [""], apiVersions: [v1], resources: [pods]}]\n' "$5"
    for field in "${@:6}"; do printf '    %s\n' "$field"; done
}

# gq_webhook_yaml mutate|validate URL CA-BUNDLE [NAME]: one of gpuquota's two
# webhook configurations as deploy/webhooks.yaml registers it, calling
# URL/mutate or URL/validate directly (named gpuquota-mutate or gpuquota-validate
# unless NAME is given).
gq_webhook_yaml() {
    if [[ $1 == mutate ]]; then
        webhook_config_yaml MutatingWebhookConfiguration "${4:-gpuquota-mutate}" mutate.gpuquota.io \
            "{url: \"$2/mutate\", caBundle: \"$3\"}" CREATE 'reinvocationPolicy: IfNeeded' \
            'failurePolicy: Fail' 'sideEffects: None'
    else
        webhook_config_yaml ValidatingWebhookConfiguration "${4:-gpuquota-validate}" \
            validate.gpuquota.io "{url: \"$2/validate\", caBundle: \"$3\"}" 'CREATE, UPDATE' \
            'failurePolicy: Fail' 'sideEffects: NoneOnDryRun'
    fi
}
