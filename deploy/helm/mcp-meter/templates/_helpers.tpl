{{/* The release's name for its objects, at most 63 characters. */}}
{{- define "mcp-meter.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "mcp-meter.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one role: control-plane, ingest or proxy. */}}
{{- define "mcp-meter.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .role }}
{{- end -}}

{{- define "mcp-meter.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "mcp-meter.secretName" -}}
{{- .Values.existingSecret | default (printf "%s-secrets" (include "mcp-meter.fullname" .)) -}}
{{- end -}}

{{/* The environment every service reads: settings, then the Secret's keys. */}}
{{- define "mcp-meter.env" -}}
- name: HOST
  value: "0.0.0.0"
- name: PROXY_HOST
  value: "0.0.0.0"
- name: PORT
  value: "8080"
- name: PROXY_PORT
  value: "8081"
# Ingest alone answers /metrics and /healthz here (the control plane's page has them beside it).
- name: INGEST_METRICS_PORT
  value: "9464"
- name: DATA_DIR
  value: /data
- name: PUBLIC_URL
  value: {{ required "publicUrl is required" .Values.publicUrl | quote }}
- name: PROXY_PUBLIC_URL
  value: {{ required "proxyPublicUrl is required" .Values.proxyPublicUrl | quote }}
{{- with .Values.proxyBaseDomain }}
- name: PROXY_BASE_DOMAIN
  value: {{ . | quote }}
{{- end }}
- name: CONTROL_PLANE_URL
  value: {{ printf "http://%s-control-plane:8080" (include "mcp-meter.fullname" .) | quote }}
- name: LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
{{- with .Values.clickhouseCluster }}
- name: CLICKHOUSE_CLUSTER
  value: {{ . | quote }}
{{- end }}
{{- range $name := list "SECRET_KEY" "DATABASE_URL" "REDIS_URL" "KAFKA_BROKERS" "CLICKHOUSE_URL" "CLICKHOUSE_USER" "CLICKHOUSE_PASSWORD" }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ include "mcp-meter.secretName" $ }}
      key: {{ $name }}
{{- end }}
# Every service's GET /metrics needs it as a bearer token when the Secret has one.
- name: METRICS_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "mcp-meter.secretName" . }}
      key: METRICS_TOKEN
      optional: true
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}
