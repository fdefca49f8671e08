{{/*
The drivers[] presets: everything a driver entry needs that the preset knows, each field
replaced by the entry's own where the entry sets it, false included (maps merge key by key:
driver-rollout.overlay). The images are
the ones drivers/build-driver-images.ts builds (drivers/flavours.ts; a test keeps the two in
step); docs/presets.md lists what each supports.

- nvidia: NVIDIA's proprietary 535.309.01 (Debian bookworm-security nvidia-kernel-dkms), modules
  prebuilt for kernel 6.1.0-56-amd64 and compiled on the node for any other.
- nvidia-open: NVIDIA's open 535.261.03 (Debian nvidia-open-kernel-dkms), prebuilt for
  6.1.0-50-amd64; it does not compile for 6.1.0-56 and later (pci_resize_resource).
- dkms-nic: Realtek r8168 8.051.02 (Debian r8168-dkms), built on the node by DKMS, as the NIC
  drivers the Network Operator ships are.
- custom: nothing; the entry names its image, version, sources and modules.
*/}}
{{- define "driver-rollout.presets" -}}
{{- $gpuPolicy := dict
  "autoUpgrade" true
  "maxParallelUpgrades" 1
  "maxUnavailable" "25%"
  "podDeletion" (dict "enable" true "timeoutSeconds" 300 "resourcePrefixes" (list "nvidia.com/gpu" "nvidia.com/mig-"))
  "drain" (dict "enable" false "timeoutSeconds" 300)
-}}
{{- $nicPolicy := dict
  "autoUpgrade" true
  "maxParallelUpgrades" 1
  "maxUnavailable" "25%"
  "podDeletion" (dict "enable" false)
  "drain" (dict "enable" true "force" false "timeoutSeconds" 300 "deleteEmptyDir" true)
-}}
{{- $nvidia := dict
  "pciVendor" "10de"
  "deviceClasses" (list "0300" "0302")
  "source" (dict "dir" "/opt/driver-src")
  "prebuiltModulesDir" "/opt/lib/modules"
  "firmwareDir" "/opt/driver-firmware"
  "loadPlan" "nvidia"
  "modules" (list "nvidia" "nvidia_uvm" "nvidia_modeset")
  "moduleBlacklist" (list "nouveau")
  "blacklistOnHost" true
  "deviceFilePrefixes" (list "/dev/nvidia")
  "preflightModules" (list "nvidia_drm" "nvidia_modeset" "nvidia_uvm" "nvidia")
  "driverRoot" (dict "dir" "/opt/driver-root" "path" "/run/nvidia/driver" "check" (list "nvidia-smi"))
  "upgradePolicy" $gpuPolicy
-}}
{{- $presets := dict
  "nvidia" (merge (dict
    "image" (dict "repository" "driver-rollout/nvidia-driver" "tag" "535.309.01-proprietary-debian12")
    "version" "535.309.01"
    "buildRecipe" (dict "kind" "dkms" "packages" (list (dict "directory" "nvidia-current-535.309.01")))
    "prebuiltKernels" (list "6.1.0-56-amd64")
    "supportedGpuFamilies" (list "maxwell" "pascal" "volta" "turing" "ampere" "ada-lovelace" "hopper")
  ) (deepCopy $nvidia))
  "nvidia-open" (merge (dict
    "image" (dict "repository" "driver-rollout/nvidia-driver" "tag" "535.261.03-open-debian12")
    "version" "535.261.03"
    "buildRecipe" (dict "kind" "dkms" "packages" (list (dict "directory" "nvidia-current-open-535.261.03")))
    "prebuiltKernels" (list "6.1.0-50-amd64")
    "supportedGpuFamilies" (list "turing" "ampere" "ada-lovelace" "hopper")
  ) (deepCopy $nvidia))
  "dkms-nic" (dict
    "image" (dict "repository" "driver-rollout/r8168-driver" "tag" "8.051.02-dkms-debian12")
    "version" "8.051.02"
    "pciVendor" "10ec"
    "deviceClasses" (list "0200")
    "source" (dict "dir" "/opt/driver-src")
    "buildRecipe" (dict "kind" "dkms" "packages" (list (dict "directory" "r8168-8.051.02")))
    "prebuiltKernels" (list)
    "loadPlan" "generic"
    "modules" (list "r8168")
    "moduleBlacklist" (list)
    "blacklistOnHost" false
    "deviceFilePrefixes" (list)
    "preflightModules" (list "r8168")
    "driverRoot" (dict "dir" "/opt/driver-root")
    "upgradePolicy" $nicPolicy
  )
  "custom" (dict
    "loadPlan" "generic"
    "moduleBlacklist" (list)
    "blacklistOnHost" false
    "deviceFilePrefixes" (list)
    "preflightModules" (list)
    "prebuiltKernels" (list)
    "upgradePolicy" (dict)
  )
-}}
{{- toJson $presets -}}
{{- end -}}

{{/*
One driver entry with its preset filled in and checked: pass a dict with "root" and "entry" (a
drivers[] entry, or one of its kernelFlavours merged over it); returns JSON (use fromJson).
Values that contradict each other fail the install, naming the value.
*/}}
{{- define "driver-rollout.resolveDriver" -}}
{{- $entry := .entry -}}
{{- $where := printf "drivers[%s]" $entry.name -}}
{{- $presets := include "driver-rollout.presets" .root | fromJson -}}
{{- $preset := index $presets $entry.preset -}}
{{- if not $preset }}{{ fail (printf "%s.preset: unknown preset %q (one of: nvidia, nvidia-open, dkms-nic, custom)" $where $entry.preset) }}{{ end -}}
{{- $d := include "driver-rollout.overlay" (dict "base" $preset "over" $entry) | fromJson -}}
{{- range $field := list "version" "modules" "source" -}}
{{- if not (index $d $field) }}{{ fail (printf "%s.%s: required with preset %q (the preset does not say it)" $where $field $entry.preset) }}{{ end -}}
{{- end -}}
{{- if and (eq $entry.preset "custom") (not $entry.image) }}{{ fail (printf "%s.image: required with preset \"custom\": an image carrying the driver's sources (agent/README.md)" $where) }}{{ end -}}
{{- if and $d.source.dir $d.source.url }}{{ fail (printf "%s.source: set dir or url, not both" $where) }}{{ end -}}
{{- range $m := $d.modules -}}
{{- if has $m ($d.moduleBlacklist | default list) }}{{ fail (printf "%s.moduleBlacklist: %s is also in %s.modules: a driver cannot blacklist its own module" $where $m $where) }}{{ end -}}
{{- end -}}
{{- $families := $d.gpuFamilies | default list -}}
{{- with $d.nodeSelector }}{{ with index . "nvidia.com/gpu.family" }}{{ $families = append $families . }}{{ end }}{{ end -}}
{{- if and $families (not $d.supportedGpuFamilies) }}{{ fail (printf "%s.gpuFamilies: preset %q knows no GPU families; gpuFamilies is for the nvidia presets" $where $entry.preset) }}{{ end -}}
{{- range $f := $families -}}
{{- if not (has $f $d.supportedGpuFamilies) }}{{ fail (printf "%s.gpuFamilies: %s GPUs are not supported by preset %q (driver %s supports: %s)" $where $f $entry.preset $d.version (join ", " $d.supportedGpuFamilies)) }}{{ end -}}
{{- end -}}
{{- $params := dict -}}
{{- range $p := $d.moduleParameters | default list -}}
{{- $params = set $params (regexReplaceAll "=.*$" $p "") true -}}
{{- end -}}
{{- range $file, $content := $d.moduleConfig | default dict -}}
{{- if not (regexMatch "^[A-Za-z0-9_-]+\\.conf$" $file) }}{{ fail (printf "%s.moduleConfig: %q is not <module>.conf" $where $file) }}{{ end -}}
{{- $module := trimSuffix ".conf" $file | replace "-" "_" -}}
{{- range $line := splitList "\n" (toString $content) -}}
{{- range $item := regexSplit "\\s+" (regexReplaceAll "#.*$" $line "") -1 -}}
{{- if $item -}}
{{- if not (regexMatch "^[A-Za-z0-9_]+=" $item) }}{{ fail (printf "%s.moduleConfig[%s]: %q is not parameter=value" $where $file $item) }}{{ end -}}
{{- $key := printf "%s.%s" $module (regexReplaceAll "=.*$" $item "") -}}
{{- if hasKey $params $key }}{{ fail (printf "%s.moduleConfig[%s]: %s is also set in %s.moduleParameters" $where $file $key $where) }}{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $d -}}
{{- end -}}

{{/*
The checksum of a moduleConfig map as the agent computes it from the mounted files
(agent/kernel/module-config-sha256.ts): sha256 of "<file>=<base64 content>;" over
the files sorted by name.
*/}}
{{- define "driver-rollout.moduleConfigSha256" -}}
{{- $config := . -}}
{{- $text := "" -}}
{{- range $file := keys $config | sortAlpha -}}
{{- $text = printf "%s%s=%s;" $text $file (index $config $file | toString | b64enc) -}}
{{- end -}}
{{- sha256sum $text -}}
{{- end -}}

{{/*
`over` laid over `base`: maps merge key by key, any other value of `over` replaces base's, false,
0 and "" included (sprig's merge would keep base's true under an entry's false). Pass a dict with
"base" and "over"; returns JSON (use fromJson).
*/}}
{{- define "driver-rollout.overlay" -}}
{{- $out := deepCopy .base -}}
{{- range $k, $v := .over -}}
{{- $b := index $out $k -}}
{{- if and (kindIs "map" $v) (kindIs "map" $b) -}}
{{- $_ := set $out $k (include "driver-rollout.overlay" (dict "base" $b "over" $v) | fromJson) -}}
{{- else -}}
{{- $_ := set $out $k $v -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}
