{{- define "membloat.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "membloat.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if hasSuffix "-exporter" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-exporter" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "membloat.selectorLabels" -}}
app.kubernetes.io/name: {{ include "membloat.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "membloat.labels" -}}
{{ include "membloat.selectorLabels" . }}
app.kubernetes.io/component: exporter
app.kubernetes.io/part-of: membloat
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "membloat.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "membloat.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "membloat.priorityClassName" -}}
{{- default (include "membloat.fullname" .) .Values.priorityClass.name -}}
{{- end -}}

{{- define "membloat.webConfigSecret" -}}
{{- if .Values.webConfig.existingSecret -}}
{{- .Values.webConfig.existingSecret -}}
{{- else if .Values.webConfig.content -}}
{{- printf "%s-web-config" (include "membloat.fullname" .) -}}
{{- end -}}
{{- end -}}
