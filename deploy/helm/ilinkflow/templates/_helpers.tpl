{{/* The chart's name. */}}
{{- define "ilinkflow.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name, the prefix of every object. */}}
{{- define "ilinkflow.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "ilinkflow.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "ilinkflow.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "ilinkflow.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ilinkflow.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "ilinkflow.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "ilinkflow.selectorLabels" . }}
app.kubernetes.io/version: {{ include "ilinkflow.tag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "ilinkflow.tag" -}}
{{- default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{- define "ilinkflow.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "ilinkflow.tag" .) }}
{{- end }}

{{- define "ilinkflow.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ilinkflow.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret the containers read their secrets from. */}}
{{- define "ilinkflow.secretName" -}}
{{- if .Values.secrets.existingSecret }}
{{- .Values.secrets.existingSecret }}
{{- else }}
{{- printf "%s-secrets" (include "ilinkflow.fullname" .) }}
{{- end }}
{{- end }}

{{/* Fails the render when a required setting is missing. */}}
{{- define "ilinkflow.validate" -}}
{{- $_ := required "temporal.address is required (the Temporal frontend host:port)" .Values.temporal.address }}
{{- if not .Values.secrets.existingSecret }}
{{- $_ := required "secrets.values.DATABASE_URL is required (or set secrets.existingSecret)" .Values.secrets.values.DATABASE_URL }}
{{- $_ := required "secrets.values.ILINKFLOW_SEALING_KEYS is required (starter keygen --generation 1; or set secrets.existingSecret)" .Values.secrets.values.ILINKFLOW_SEALING_KEYS }}
{{- end }}
{{- if and .Values.versioning.buildId (not .Values.versioning.deploymentName) }}
{{- fail "versioning.buildId needs versioning.deploymentName" }}
{{- end }}
{{- if le (int (include "ilinkflow.terminationGrace" .)) (int .Values.worker.shutdownGraceSeconds) }}
{{- fail "worker.terminationGracePeriodSeconds must exceed worker.shutdownGraceSeconds (the kubelet would kill the worker while in-flight sends finish)" }}
{{- end }}
{{- end }}

{{- define "ilinkflow.terminationGrace" -}}
{{- if kindIs "invalid" .Values.worker.terminationGracePeriodSeconds }}
{{- add (mul 2 (int .Values.worker.shutdownGraceSeconds)) 15 }}
{{- else }}
{{- int .Values.worker.terminationGracePeriodSeconds }}
{{- end }}
{{- end }}

{{/*
The secret environment variables of the worker, each from the key of the same name; all
but DATABASE_URL and ILINKFLOW_SEALING_KEYS may be absent.
*/}}
{{- define "ilinkflow.secretEnv" -}}
{{- $secret := include "ilinkflow.secretName" . }}
{{- range $name := list "DATABASE_URL" "ILINKFLOW_SEALING_KEYS" "TEMPORAL_API_KEY" "ILINKFLOW_UI_TOKEN" "ILINKFLOW_CODEC_TOKEN" "ILINKFLOW_WEBHOOK_SECRET" }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ $name }}
      {{- if not (has $name (list "DATABASE_URL" "ILINKFLOW_SEALING_KEYS")) }}
      optional: true
      {{- end }}
{{- end }}
{{- end }}
