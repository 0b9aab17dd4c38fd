{{/* Labels of the certificate machinery (self-managed mode). */}}
{{- define "gpuquota.certsLabels" -}}
{{ include "gpuquota.labels" . }}
app.kubernetes.io/name: gpuquota
app.kubernetes.io/component: certs
{{- end }}

{{/* The pod of the certificate step. Arguments: root, sa, phase ("pre",
"post" or "cron"). It injects, except before the first install when no
webhook configuration exists yet; one that exists then (an install made
with deploy/ being taken over) gets the bundle before the new Secrets. */}}
{{- define "gpuquota.certsPod" -}}
{{- $ := .root }}
{{- $s := $.Values.certificates.selfManaged }}
{{- $live := lookup "admissionregistration.k8s.io/v1" "MutatingWebhookConfiguration" "" "gpuquota" }}
{{- $inject := not (and (eq .phase "pre") $.Release.IsInstall (not $live)) }}
{{- $bundle := "" }}
{{- if and $live $live.webhooks }}{{ $bundle = (index $live.webhooks 0).clientConfig.caBundle | default "" }}{{ end }}
metadata:
  labels: {app.kubernetes.io/name: gpuquota, app.kubernetes.io/component: certs}
spec:
  serviceAccountName: {{ .sa }}
  restartPolicy: OnFailure
  securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
  {{- include "gpuquota.certsPlacement" $ | nindent 2 }}
  containers:
    # `gpuquota certs reconcile` (docs/certs.md): from the two Secrets as
    # they are, renew the serving pair when it or the CA expires within
    # renewBeforeDays (a CA that outlives it is kept, so the caBundle
    # stays), keep every CA trusted so far in the bundle until it expires,
    # tell kube-apiserver (--inject) and only then write the Secrets:
    # kube-apiserver trusts a new CA before any webhook serves a
    # certificate signed by it.
    - name: certs
      image: {{ include "gpuquota.image" $ }}
      imagePullPolicy: {{ $.Values.image.pullPolicy }}
      args:
        - certs
        - reconcile
        - --namespace={{ $.Release.Namespace }}
        - --work=/scratch
        - --days={{ $s.days }}
        - --ca-days={{ $s.caDays }}
        - --renew-days={{ $s.renewBeforeDays }}
        {{- if $inject }}
        - --inject
        {{- end }}
        {{- if $bundle }}
        - --live-bundle={{ $bundle }}
        {{- end }}
      resources: {{- toYaml $s.resources | nindent 8 }}
      securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
      volumeMounts: [{name: work, mountPath: /scratch}]
  volumes: [{name: work, emptyDir: {medium: Memory}}]
{{- end }}

{{/* Where the certificate Jobs run: the controller's placement. */}}
{{- define "gpuquota.certsPlacement" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.controller.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.controller.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
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
  # certs reconcile reads each Secret, then creates it or updates it at the
  # resourceVersion read; the post-delete Job deletes them. Create cannot be
  # narrowed by name.
  - apiGroups: [""]
    resources: [secrets]
    resourceNames: [gpuquota-webhook-ca, gpuquota-webhook-tls]
    verbs: [get, update, delete]
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
