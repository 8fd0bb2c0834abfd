{{- define "taskgate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "taskgate.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "taskgate.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gateway
{{- end -}}

{{- define "taskgate.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Non-root, numeric, as the image's user; nothing escalates. */}}
{{- define "taskgate.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "taskgate.securityContext" -}}
runAsNonRoot: true
runAsUser: 65532
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/* The ledger, the secrets keys and the upstream credentials, from Secrets. */}}
{{- define "taskgate.env" -}}
{{- if eq .Values.database.kind "postgres" }}
- name: TASKGATE_DB
  valueFrom:
    secretKeyRef:
      name: {{ .Values.database.postgres.urlSecret.name }}
      key: {{ .Values.database.postgres.urlSecret.key }}
{{- else }}
- name: TASKGATE_DB
  value: sqlite:/data/taskgate.db
{{- end }}
{{- if .Values.secretsKeys.secretName }}
- name: TASKGATE_SECRETS_KEYS
  valueFrom:
    secretKeyRef:
      name: {{ .Values.secretsKeys.secretName }}
      key: {{ .Values.secretsKeys.key }}
{{- end }}
{{- range .Values.secretEnv }}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ .secretName }}
      key: {{ .key }}
{{- end }}
{{- end -}}
