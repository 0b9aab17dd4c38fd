{{/* Labels of the certificate machinery (self-managed mode). */}}
{{- define "gpuquota.certsLabels" -}}
{{ include "gpuquota.labels" . }}
app.kubernetes.io/name: gpuquota
app.kubernetes.io/component: certs
{{- end }}

{{/*
The self-managed certificate step, run by the hook Jobs and the CronJob in
the gpuquota image (sh): from the Secrets as they are (mounted under $IN),
renew the serving pair when it is missing or expires within RENEW_DAYS
(`certs generate` keeps a CA that outlives it, so the caBundle stays), make
the bundle the current CA plus the previous one when the CA changed (the
previous one leaves the bundle at the next renewal), tell
kube-apiserver (`certs inject`, when INJECT=yes) and only then write
secrets.yaml, which the next container applies: kube-apiserver trusts the
new CA before any webhook serves a certificate signed by it.
*/}}
{{- define "gpuquota.certsScript" -}}
set -eu
gq=${GQ:-gpuquota}
in=${IN:-/in}
cd "${WORK:-/scratch}"
for f in ca.crt ca.key bundle.crt; do [ ! -s "$in/ca/$f" ] || cp "$in/ca/$f" "$f"; done
for f in tls.crt tls.key; do [ ! -s "$in/tls/$f" ] || cp "$in/tls/$f" "$f"; done
old_ca=""
[ ! -s ca.crt ] || old_ca=$(cat ca.crt)
if [ -s tls.crt ] && [ -s tls.key ] && [ -s ca.key ] && [ -s bundle.crt ] &&
    "$gq" certs inspect --warn-days "$RENEW_DAYS" tls.crt ca.crt; then
    # Nothing renewed: the bundle stays as it is (after a CA change it still
    # holds the previous CA, which pods not yet given the new pair need).
    echo "certs: the serving certificate is valid beyond $RENEW_DAYS days; kept"
else
    "$gq" certs generate --service gpuquota-webhook --namespace "$NS" --out . \
        --days "$DAYS" --ca-days "$CA_DAYS"
    # The bundle: the current CA, and every CA trusted so far that has not
    # expired, so that pods still serving a pair of a previous CA (the
    # kubelet updates Secret volumes within a minute or so) stay trusted. A
    # CA is replaced only when it no longer outlives a serving certificate,
    # so a previous one leaves the bundle within DAYS.
    if [ -s bundle.crt ]; then
        cp bundle.crt previous.crt
    elif [ -n "${LIVE_BUNDLE:-}" ]; then
        # No CA of ours yet but webhooks that trust one (an install made by
        # hand): keep trusting it until the new pair is served.
        printf '%s' "$LIVE_BUNDLE" | base64 -d >previous.crt
    else
        : >previous.crt
    fi
    printf '%s\n' "$old_ca" >>previous.crt
    awk '/-----BEGIN CERTIFICATE-----/ {n++; f = "prev-" n ".pem"} f {print > f} /-----END CERTIFICATE-----/ {close(f); f = ""}' previous.crt
    cp ca.crt kept-0.pem
    i=0
    for f in prev-*.pem; do
        [ -s "$f" ] || continue
        dup=no
        for g in kept-*.pem; do ! cmp -s "$f" "$g" || dup=yes; done
        [ $dup = no ] || continue
        "$gq" certs inspect --warn-days 0 "$f" >/dev/null || continue
        i=$((i + 1))
        cp "$f" "kept-$i.pem"
    done
    cat kept-*.pem >bundle.crt
fi
if [ "$INJECT" = yes ]; then
    "$gq" certs inject --ca bundle.crt
fi
b64() { base64 -w0 <"$1"; }
labels="{app.kubernetes.io/name: gpuquota, app.kubernetes.io/component: certs}"
cat >secrets.yaml <<EOF
apiVersion: v1
kind: Secret
metadata: {name: gpuquota-webhook-ca, namespace: $NS, labels: $labels}
type: Opaque
data: {ca.crt: $(b64 ca.crt), ca.key: $(b64 ca.key), bundle.crt: $(b64 bundle.crt)}
---
apiVersion: v1
kind: Secret
metadata: {name: gpuquota-webhook-tls, namespace: $NS, labels: $labels}
type: kubernetes.io/tls
data: {tls.crt: $(b64 tls.crt), tls.key: $(b64 tls.key), ca.crt: $(b64 ca.crt)}
EOF
echo "certs: secrets.yaml written"
{{- end }}

{{/* The pod of the certificate step. Arguments: root, sa, phase ("pre",
"post" or "cron"). It injects, except before the first install when no
webhook configuration exists yet; one that exists then (an install made
with deploy/ being taken over) gets the bundle before the new Secrets. */}}
{{- define "gpuquota.certsPod" -}}
{{- $ := .root }}
{{- $s := $.Values.certificates.selfManaged }}
{{- $live := lookup "admissionregistration.k8s.io/v1" "MutatingWebhookConfiguration" "" "gpuquota" }}
{{- $bundle := "" }}
{{- if and $live $live.webhooks }}{{ $bundle = (index $live.webhooks 0).clientConfig.caBundle | default "" }}{{ end }}
{{- $inject := ternary "no" "yes" (and (eq .phase "pre") $.Release.IsInstall (not $live)) }}
metadata:
  labels: {app.kubernetes.io/name: gpuquota, app.kubernetes.io/component: certs}
spec:
  serviceAccountName: {{ .sa }}
  restartPolicy: OnFailure
  securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
  {{- with $.Values.imagePullSecrets }}
  imagePullSecrets: {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $.Values.controller.nodeSelector }}
  nodeSelector: {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $.Values.controller.tolerations }}
  tolerations: {{- toYaml . | nindent 4 }}
  {{- end }}
  initContainers:
    - name: generate
      image: {{ include "gpuquota.image" $ }}
      imagePullPolicy: {{ $.Values.image.pullPolicy }}
      command: [/bin/sh, -c]
      args:
        - {{ include "gpuquota.certsScript" $ | quote }}
      env:
        - {name: NS, value: {{ $.Release.Namespace | quote }}}
        - {name: DAYS, value: {{ $s.days | quote }}}
        - {name: CA_DAYS, value: {{ $s.caDays | quote }}}
        - {name: RENEW_DAYS, value: {{ $s.renewBeforeDays | quote }}}
        - {name: INJECT, value: {{ $inject | quote }}}
        - {name: LIVE_BUNDLE, value: {{ $bundle | quote }}}
      resources: {{- toYaml $s.resources | nindent 8 }}
      securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
      volumeMounts:
        - {name: ca, mountPath: /in/ca, readOnly: true}
        - {name: tls, mountPath: /in/tls, readOnly: true}
        - {name: work, mountPath: /scratch}
  containers:
    - name: store
      image: {{ $s.kubectlImage }}
      command: [kubectl, apply, -f, /scratch/secrets.yaml]
      # kubectl keeps its discovery cache under $HOME; the root is read-only.
      env: [{name: HOME, value: /tmp}]
      resources: {{- toYaml $s.resources | nindent 8 }}
      securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
      volumeMounts:
        - {name: work, mountPath: /scratch, readOnly: true}
        - {name: tmp, mountPath: /tmp}
  volumes:
    - {name: tmp, emptyDir: {}}
    - {name: ca, secret: {secretName: gpuquota-webhook-ca, optional: true}}
    - {name: tls, secret: {secretName: gpuquota-webhook-tls, optional: true}}
    - {name: work, emptyDir: {medium: Memory}}
{{- end }}

{{/* What the certificate step may do. Arguments: root, name, hook (annotations or ""). */}}
{{- define "gpuquota.certsRBAC" -}}
{{- $ := .root }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .name }}
  namespace: {{ $.Release.Namespace }}
  labels: {{- include "gpuquota.certsLabels" $ | nindent 4 }}
  {{- with .hook }}
  annotations: {{- . | nindent 4 }}
  {{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .name }}
  namespace: {{ $.Release.Namespace }}
  labels: {{- include "gpuquota.certsLabels" $ | nindent 4 }}
  {{- with .hook }}
  annotations: {{- . | nindent 4 }}
  {{- end }}
rules:
  # kubectl apply reads, then creates or patches; create cannot be narrowed by name.
  - apiGroups: [""]
    resources: [secrets]
    resourceNames: [gpuquota-webhook-ca, gpuquota-webhook-tls]
    verbs: [get, patch, update, delete]
  - apiGroups: [""]
    resources: [secrets]
    verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .name }}
  namespace: {{ $.Release.Namespace }}
  labels: {{- include "gpuquota.certsLabels" $ | nindent 4 }}
  {{- with .hook }}
  annotations: {{- . | nindent 4 }}
  {{- end }}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: {{ .name }}}
subjects: [{kind: ServiceAccount, name: {{ .name }}, namespace: {{ $.Release.Namespace }}}]
---
# certs inject: the ClusterRole of deploy/rbac.yaml (the two configurations named gpuquota).
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ .name }}
  labels: {{- include "gpuquota.certsLabels" $ | nindent 4 }}
  {{- with .hook }}
  annotations: {{- . | nindent 4 }}
  {{- end }}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: gpuquota-certs}
subjects: [{kind: ServiceAccount, name: {{ .name }}, namespace: {{ $.Release.Namespace }}}]
{{- end }}
