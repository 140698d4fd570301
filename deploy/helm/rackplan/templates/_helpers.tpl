{{/* Resource names: the release name, with "rackplan" unless the release name holds it already. */}}
{{- define "rackplan.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The pods' selector. app.kubernetes.io/name is always "rackplan": the monitors take the
job label from it, and the alerting rules select job="rackplan". */}}
{{- define "rackplan.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "rackplan.labels" -}}
{{ include "rackplan.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "rackplan.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "rackplan.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "rackplan.secretName" -}}
{{- default (printf "%s-credentials" (include "rackplan.fullname" .)) .Values.existingSecret -}}
{{- end -}}

{{- define "rackplan.hasSecret" -}}
{{- if or .Values.existingSecret .Values.credentials -}}true{{- end -}}
{{- end -}}

{{/* The readiness mode, refused when it is neither of the two. */}}
{{- define "rackplan.readiness" -}}
{{- if not (has .Values.readiness (list "leader" "alive")) -}}
{{- fail (printf "readiness: %q is neither \"leader\" nor \"alive\"" (toString .Values.readiness)) -}}
{{- end -}}
{{- .Values.readiness -}}
{{- end -}}
