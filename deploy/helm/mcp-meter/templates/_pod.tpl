{{/*
One role's pod template: .root (the chart's context), .role, .values (the role's values), .port
(the HTTP port it serves /healthz on, or none for ingest: its metrics port), .extraVolumes/.extraMounts.
*/}}
{{- define "mcp-meter.pod" -}}
metadata:
  labels:
    {{- include "mcp-meter.labels" .root | nindent 4 }}
    {{- include "mcp-meter.selector" (dict "root" .root "role" .role) | nindent 4 }}
  annotations:
    checksum/settings: {{ toJson .root.Values | sha256sum | trunc 16 }}
spec:
  {{- with .root.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml .root.Values.podSecurityContext | nindent 4 }}
  terminationGracePeriodSeconds: {{ .values.terminationGracePeriodSeconds | default 30 }}
  containers:
    - name: {{ .role }}
      image: {{ include "mcp-meter.image" .root | quote }}
      imagePullPolicy: {{ .root.Values.image.pullPolicy }}
      securityContext:
        {{- toYaml .root.Values.securityContext | nindent 8 }}
      env:
        - name: SERVICES
          value: {{ .role | quote }}
        {{- include "mcp-meter.env" .root | nindent 8 }}
      {{- if .port }}
      ports:
        - name: http
          containerPort: {{ .port }}
          protocol: TCP
      readinessProbe:
        httpGet:
          path: /healthz
          port: http
        periodSeconds: 5
        failureThreshold: 3
      livenessProbe:
        httpGet:
          path: /healthz
          port: http
        initialDelaySeconds: 30
        periodSeconds: 10
        failureThreshold: 6
      {{- else }}
      # Ingest serves no API: /metrics and /healthz on INGEST_METRICS_PORT, which
      # deploy/healthcheck.mjs asks.
      ports:
        - name: metrics
          containerPort: 9464
          protocol: TCP
      livenessProbe:
        exec:
          command: ["node", "deploy/healthcheck.mjs"]
        periodSeconds: 30
      {{- end }}
      {{- if .port }}
      # Endpoints are removed while SIGTERM is sent: waiting first lets load balancers stop
      # sending new requests before the service stops taking them.
      lifecycle:
        preStop:
          exec:
            command: ["sleep", "5"]
      {{- end }}
      resources:
        {{- toYaml .values.resources | nindent 8 }}
      volumeMounts:
        - name: data
          mountPath: /data
        - name: tmp
          mountPath: /tmp
  volumes:
    # DATA_DIR: the write-ahead spool (PROXY_SPILL_DIR, CONTROL_PLANE_SPILL_DIR) and nothing else.
    - name: data
      {{- if .values.spoolSizeLimit }}
      emptyDir:
        sizeLimit: {{ .values.spoolSizeLimit }}
      {{- else }}
      emptyDir: {}
      {{- end }}
    - name: tmp
      emptyDir: {}
  {{- with .values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
