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
{{- $registry := .root.Values.images.registry | default "" | trimSuffix "/" -}}
{{- printf "%s%s:%s" (ternary "" (printf "%s/" $registry) (eq $registry "")) .image.repository (default .root.Chart.AppVersion .image.tag) -}}
{{- end -}}

{{/* The drivers[] entries with enabled: true, as a JSON array (use with fromJsonArray). */}}
{{- define "driver-rollout.enabledDrivers" -}}
{{- $out := list -}}
{{- range .Values.drivers }}{{ if .enabled }}{{ $out = append $out . }}{{ end }}{{ end -}}
{{- toJson $out -}}
{{- end -}}

{{/*
The driver DaemonSets, as a JSON array (use with fromJsonArray): per enabled drivers[] entry, one
for its preset and one per kernelFlavours item, each {name, dsName, driver (resolved, see
_presets.tpl), kernelsIn, kernelsNotIn}. A flavour's DaemonSet runs on nodes whose NFD label
feature.node.kubernetes.io/kernel-version.full is one of its kernels; the entry's own runs on
every other node. One DaemonSet cannot switch flavour per node: the driver identity the
coordinator compares comes from the pod template.
*/}}
{{- define "driver-rollout.driverDaemonSets" -}}
{{- $root := . -}}
{{- $out := list -}}
{{- range $e := .Values.drivers }}{{ if $e.enabled }}
{{- $base := printf "%s-%s" (include "driver-rollout.fullname" $root) $e.name -}}
{{- $taken := list -}}
{{- range $i, $f := $e.kernelFlavours | default list -}}
{{- if not $f.kernels }}{{ fail (printf "drivers[%s].kernelFlavours[%d].kernels: at least one kernel release (NFD's kernel-version.full)" $e.name $i) }}{{ end -}}
{{- if eq $f.preset $e.preset }}{{ fail (printf "drivers[%s].kernelFlavours[%d].preset: %q is the entry's own preset" $e.name $i $f.preset) }}{{ end -}}
{{- range $k := $f.kernels -}}
{{- if has $k $taken }}{{ fail (printf "drivers[%s].kernelFlavours[%d].kernels: %s is named by two flavours" $e.name $i $k) }}{{ end -}}
{{- $taken = append $taken $k -}}
{{- end -}}
{{- end -}}
{{- $own := omit $e "kernelFlavours" -}}
{{- $out = append $out (dict "name" $e.name "dsName" $base "driver" (include "driver-rollout.resolveDriver" (dict "root" $root "entry" $own) | fromJson) "kernelsIn" (list) "kernelsNotIn" $taken) -}}
{{- range $f := $e.kernelFlavours | default list -}}
{{- $entry := include "driver-rollout.overlay" (dict "base" (omit $own "image" "version" "source" "buildRecipe" "prebuiltKernels" "supportedGpuFamilies" "preset") "over" (omit $f "kernels")) | fromJson -}}
{{- $out = append $out (dict "name" $e.name "dsName" (printf "%s-%s" $base $f.preset) "driver" (include "driver-rollout.resolveDriver" (dict "root" $root "entry" $entry) | fromJson) "kernelsIn" $f.kernels "kernelsNotIn" (list)) -}}
{{- end -}}
{{- end }}{{ end -}}
{{- toJson $out -}}
{{- end -}}
