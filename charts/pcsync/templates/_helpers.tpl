{{/*
The labels of every object: deploy/base's (its kustomization's labels),
and Helm's own.
*/}}
{{- define "pcsync.labels" -}}
app.kubernetes.io/name: pcsync
app.kubernetes.io/part-of: pcsync
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/*
pcsync's image: <registry>/<repository>:<tag>, the tag the chart's
appVersion unless image.tag says another.
*/}}
{{- define "pcsync.image" -}}
{{- $registry := required "image.registry: the registry that holds pcsync's images (make release or make images REGISTRY=… PUSH=1 pushed them)" .Values.image.registry -}}
{{- printf "%s/%s:%s" (trimSuffix "/" $registry) .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end }}
