{{/*
Prefix of every name: the release name when it contains the chart name (release
"driver-rollout" gives the names of manifests/), else "<release>-driver-rollout".
*/}}
{{- define "driver-rollout.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "driver-rollout.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; pass a dict with "root" (the top context) and "component". */}}
{{- define "driver-rollout.labels" -}}
app.kubernetes.io/part-of: {{ include "driver-rollout.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "driver-rollout.coordinator.name" -}}
{{- printf "%s-coordinator" (include "driver-rollout.fullname" .) -}}
{{- end -}}

{{- define "driver-rollout.coordinator.selector" -}}
app.kubernetes.io/name: {{ include "driver-rollout.coordinator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The driver pods' service account; the admission policy matches exactly this one. */}}
{{- define "driver-rollout.driver.serviceAccount" -}}
{{- printf "%s-driver" (include "driver-rollout.fullname" .) -}}
{{- end -}}

{{/* An image reference; pass a dict with "root" and "image" ({repository, tag}). */}}
{{- define "driver-rollout.image" -}}
{{- printf "%s:%s" .image.repository (default .root.Chart.AppVersion .image.tag) -}}
{{- end -}}

{{/* The drivers[] entries with enabled: true, as a JSON array (use with fromJsonArray). */}}
{{- define "driver-rollout.enabledDrivers" -}}
{{- $out := list -}}
{{- range .Values.drivers }}{{ if .enabled }}{{ $out = append $out . }}{{ end }}{{ end -}}
{{- toJson $out -}}
{{- end -}}
