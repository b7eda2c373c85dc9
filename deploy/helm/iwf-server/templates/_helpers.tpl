{{/* The release's resource name. */}}
{{- define "iwf-server.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels that select the release's pods. */}}
{{- define "iwf-server.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of every resource. */}}
{{- define "iwf-server.labels" -}}
{{ include "iwf-server.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "iwf-server.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The Secret and key holding the database URL. */}}
{{- define "iwf-server.dbSecret" -}}
{{- if .Values.database.existingSecret -}}
{{ .Values.database.existingSecret }}
{{- else if .Values.database.url -}}
{{ include "iwf-server.fullname" . }}-db
{{- else -}}
{{ fail "set database.existingSecret (a Secret with the PostgreSQL URL) or database.url" }}
{{- end -}}
{{- end -}}

{{- define "iwf-server.dbKey" -}}
{{- if .Values.database.existingSecret -}}{{ .Values.database.secretKey }}{{- else -}}url{{- end -}}
{{- end -}}

{{/* The Secret holding the token file ("" when auth is off). */}}
{{- define "iwf-server.authSecret" -}}
{{- if .Values.auth.existingSecret -}}
{{ .Values.auth.existingSecret }}
{{- else if .Values.auth.tokens -}}
{{ include "iwf-server.fullname" . }}-auth
{{- end -}}
{{- end -}}

{{- define "iwf-server.authKey" -}}
{{- if .Values.auth.existingSecret -}}{{ .Values.auth.secretKey }}{{- else -}}tokens{{- end -}}
{{- end -}}

{{/* The environment every iwf-server container gets: the database URL from its Secret. */}}
{{- define "iwf-server.dbEnv" -}}
- name: IWF_DB
  valueFrom:
    secretKeyRef:
      name: {{ include "iwf-server.dbSecret" . }}
      key: {{ include "iwf-server.dbKey" . }}
- name: IWF_DB_CONNECT_TIMEOUT
  value: {{ .Values.database.connectTimeout | quote }}
- name: IWF_LOG_FORMAT
  value: json
{{- end -}}

{{/* terminationGracePeriodSeconds: longer than the preStop sleep and --shutdown-grace together. */}}
{{- define "iwf-server.terminationGrace" -}}
{{- $need := add (int .Values.preStopSleepSeconds) (int .Values.shutdownGraceSeconds) -}}
{{- if .Values.terminationGracePeriodSeconds -}}
{{- if le (int .Values.terminationGracePeriodSeconds) (int $need) -}}
{{- fail (printf "terminationGracePeriodSeconds (%v) must exceed preStopSleepSeconds + shutdownGraceSeconds (%d): the kubelet would kill nodes still handing their work over" .Values.terminationGracePeriodSeconds $need) -}}
{{- end -}}
{{ int .Values.terminationGracePeriodSeconds }}
{{- else -}}
{{ add $need 15 }}
{{- end -}}
{{- end -}}
