{{/* Labels every object of the release carries besides deploy/'s own. */}}
{{- define "gpuquota.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{- define "gpuquota.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The configuration file: deploy/config.yaml with .Values.config merged over it. */}}
{{- define "gpuquota.config" -}}
{{- $cm := dict }}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" (.Files.Get "files/config.yaml") -1 }}
{{- $o := fromYaml $doc }}
{{- if eq (get $o "kind" | default "") "ConfigMap" }}{{ $cm = $o }}{{ end }}
{{- end }}
{{- $base := fromYaml (index $cm.data "config.yaml") }}
{{- $cfg := mergeOverwrite $base (deepCopy .Values.config) }}
{{- if $cfg.exemptNamespaces }}
{{- $ex := list }}
{{- range $cfg.exemptNamespaces }}{{ $ex = append $ex (ternary $.Release.Namespace . (eq . "gpuquota-system")) }}{{ end }}
{{- $_ := set $cfg "exemptNamespaces" ($ex | uniq) }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

