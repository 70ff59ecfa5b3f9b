{{/* The name of the release's objects: the release's, with "nodemanager" in it. */}}
{{- define "nodemanager.fullname" -}}
{{- if contains "nodemanager" .Release.Name -}}
{{- .Release.Name | trunc 53 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-nodemanager" .Release.Name | trunc 53 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "nodemanager.selectorLabels" -}}
app.kubernetes.io/name: nodemanager
{{- if not .Values.plainManifests }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
{{- end -}}

{{- define "nodemanager.labels" -}}
{{ include "nodemanager.selectorLabels" . }}
{{- if not .Values.plainManifests }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}
{{- end -}}

{{- define "nodemanager.tokenSecret" -}}
{{- .Values.statusToken.existingSecret | default (printf "%s-status" (include "nodemanager.fullname" .)) -}}
{{- end -}}

{{/* provider.yaml: the values' config with the cluster and status blocks this chart runs it with. */}}
{{- define "nodemanager.providerYaml" -}}
{{- $kube := dict "mode" .Values.mode "schedulerName" .Values.schedulerName "drainTimeout" .Values.drainTimeout "leaderElection" (dict "enabled" true "namespace" .Release.Namespace "leaseName" (include "nodemanager.fullname" .)) -}}
{{- $status := dict "listen" "0.0.0.0:8080" "bearerTokenEnv" "NODEMANAGER_STATUS_TOKEN" -}}
{{- if .Values.tls.secretName -}}
{{- $_ := set $status "tlsCertFile" "/etc/nodemanager/tls/tls.crt" -}}
{{- $_ := set $status "tlsKeyFile" "/etc/nodemanager/tls/tls.key" -}}
{{- end -}}
{{- $config := mergeOverwrite (deepCopy .Values.config) (dict "cluster" (dict "source" "kubernetes" "kubernetes" $kube) "status" $status) -}}
{{- toYaml $config -}}
{{- end -}}
