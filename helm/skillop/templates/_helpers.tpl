{{/* Chart name, overridable with nameOverride. */}}
{{- define "skillop.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-scoped full name, overridable with fullnameOverride. */}}
{{- define "skillop.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "skillop.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels: stable across upgrades. */}}
{{- define "skillop.selectorLabels" -}}
app.kubernetes.io/name: {{ include "skillop.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Common labels. */}}
{{- define "skillop.labels" -}}
helm.sh/chart: {{ include "skillop.chart" . }}
{{ include "skillop.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: skillop
{{- end }}

{{- define "skillop.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "skillop.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "skillop.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The injected gateway's image: its own values, else the operator's. */}}
{{- define "skillop.injectImage" -}}
{{- $i := .Values.injection.image }}
{{- printf "%s:%s" (default .Values.image.repository $i.repository) (default (default .Chart.AppVersion .Values.image.tag) $i.tag) }}
{{- end }}

{{/* Whether the operator serves admission webhooks (validating, mutating or both). */}}
{{- define "skillop.servesWebhooks" -}}
{{- if or .Values.webhook.enabled .Values.injection.enabled }}true{{ end }}
{{- end }}

{{/*
Rules on namespaced resources: bound with a ClusterRoleBinding when every namespace
is watched, with a RoleBinding in each namespace otherwise. Each rule is one API call
the operator makes (operator/skillop/operator/kube/) or one kopf needs to watch the
objects (skillop has no kopf handler that annotates them); tests/unit/test_chart.py
keeps the two in step. The Lease (leader election) is granted in the release
namespace only (leader-election.yaml).
*/}}
{{- define "skillop.namespacedRules" -}}
- apiGroups: ["skillop.dev"]
  resources: ["tools", "skills", "actors", "skillpolicies"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["skillop.dev"]
  resources: ["skills/status", "actors/status", "skillpolicies/status"]
  verbs: ["get", "patch"]
# Approval requests: Events and metrics for each, Pending then Expired, and
# cleanup of decided ones (docs/gateway.md, Approvals).
- apiGroups: ["skillop.dev"]
  resources: ["toolcallapprovals"]
  verbs: ["get", "list", "watch", "delete"]
- apiGroups: ["skillop.dev"]
  resources: ["toolcallapprovals/status"]
  verbs: ["get", "patch"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- if .Values.mcp.headersFromSecrets }}
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{- end }}
{{- if .Values.injection.enabled }}
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch"]
{{- end }}
{{- end }}

{{/* Cluster-scoped reads kopf needs in either mode. */}}
{{- define "skillop.clusterRules" -}}
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["skillop.dev"]
  resources: ["clusterskillpolicies"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["skillop.dev"]
  resources: ["clusterskillpolicies/status"]
  verbs: ["get", "patch"]
{{- end }}

{{/* The webhook's Service, Secret (mounted by the Deployment) and cert-manager Certificate. */}}
{{- define "skillop.webhookService" -}}
{{- printf "%s-webhook" (include "skillop.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
cert-manager and the chart's own CA write differently named Secrets, so switching
between the two never makes Helm adopt (or cert-manager overwrite) the other's.
*/}}
{{- define "skillop.webhookSecret" -}}
{{- if .Values.webhook.certManager.enabled }}
{{- printf "%s-webhook-cert" (include "skillop.fullname" .) }}
{{- else }}
{{- printf "%s-webhook-tls" (include "skillop.fullname" .) }}
{{- end }}
{{- end }}

{{- define "skillop.webhookCertificate" -}}
{{- printf "%s-webhook" (include "skillop.fullname" .) }}
{{- end }}

{{/* Where the webhook Secret is mounted in the operator container. */}}
{{- define "skillop.webhookCertDir" -}}
/etc/skillop/webhook
{{- end }}

{{/* The leader election Lease, in the release namespace. */}}
{{- define "skillop.leaseName" -}}
{{- include "skillop.fullname" . }}{{ with .Values.shard.name }}-{{ . }}{{ end }}
{{- end }}

{{- /*
The shard's namespaceSelector (a kubectl-style equality selector string) as
matchExpressions entries, for the admission webhooks' namespaceSelector: each
release's webhooks see only its shard's namespaces, so an object is admitted
(and a pod injected) by exactly one installation.
*/}}
{{- define "skillop.shardExpressions" -}}
{{- range $part := splitList "," (.Values.shard.namespaceSelector | replace "==" "=") }}
{{- $req := trim $part }}
{{- if contains "!=" $req }}
{{- $kv := splitList "!=" $req }}
- key: {{ trim (first $kv) | quote }}
  operator: NotIn
  values: [{{ trim (last $kv) | quote }}]
{{- else if contains "=" $req }}
{{- $kv := splitList "=" $req }}
- key: {{ trim (first $kv) | quote }}
  operator: In
  values: [{{ trim (last $kv) | quote }}]
{{- else if hasPrefix "!" $req }}
- key: {{ trimPrefix "!" $req | trim | quote }}
  operator: DoesNotExist
{{- else if $req }}
- key: {{ $req | quote }}
  operator: Exists
{{- end }}
{{- end }}
{{- end }}
