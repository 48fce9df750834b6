package sandbox

import "fmt"

// Code is a stable word for why a hook failed or what a probe found: the
// plugin and Paperclip show it beside the message, and the metrics count
// refused acquires by it.
type Code string

// The codes of refusals (UserError) and of the API's own failures.
const (
	// CodeNoConfig: the daemon has no valid pcsync config loaded.
	CodeNoConfig Code = "no_config"
	// CodeConfigInvalid: the environment's config has problems.
	CodeConfigInvalid Code = "config_invalid"
	// CodeImageNotAllowed: the image is no adapter's and matches no glob of
	// Settings spec.images.allowList.
	CodeImageNotAllowed Code = "image_not_allowed"
	// CodeCompanySuspended: the company has spec.suspend: no new lease
	// until it is resumed (those going go on).
	CodeCompanySuspended Code = "company_suspended"
	// CodeCompanyMismatch: config.company is another Paperclip company's.
	CodeCompanyMismatch Code = "company_mismatch"
	// CodeAgentUnresolved: pcsync cannot tell which declared agent the run's
	// agent is.
	CodeAgentUnresolved Code = "agent_unresolved"
	// CodeNoImage: the adapter type has no image in the config.
	CodeNoImage Code = "no_image"
	// CodeExpiryPassed: Paperclip asked for an expiry that has passed.
	CodeExpiryPassed Code = "expiry_passed"
	// CodeNamespaceNotTenant: the namespace is not the company's tenant.
	CodeNamespaceNotTenant Code = "namespace_not_tenant"
	// CodeNamespaceMissing: the company's namespace does not exist.
	CodeNamespaceMissing Code = "namespace_missing"
	// CodeCredentialMissing: a credential the lease's CLI uses
	// (spec.credentials) has no Secret in the tenant namespace.
	CodeCredentialMissing Code = "credential_missing"
	// CodeQuotaFull: the company's ResourceQuota refused the pod.
	CodeQuotaFull Code = "quota_full"
	// CodePodForbidden: the API server refused the pod (RBAC, admission).
	CodePodForbidden Code = "pod_forbidden"
	// CodeImagePullFailed: the kubelet cannot pull an image of the pod.
	CodeImagePullFailed Code = "image_pull_failed"
	// CodePodNotStarting: a container of the pod cannot start.
	CodePodNotStarting Code = "pod_not_starting"
	// CodePodUnschedulable: the scheduler found no node within the wait.
	CodePodUnschedulable Code = "pod_unschedulable"
	// CodePodNotReady: the pod did not run within the wait.
	CodePodNotReady Code = "pod_not_ready"
	// CodeStorageGone: a suspended lease's claim, which kept its
	// workspace, is gone: the lease is ended.
	CodeStorageGone Code = "storage_gone"
	// CodeProxyUnavailable: the company's egress proxy, scaled up from
	// zero for the lease, did not answer within the wait.
	CodeProxyUnavailable Code = "proxy_unavailable"

	// CodeBadRequest: a hook's params do not decode.
	CodeBadRequest Code = "bad_request"
	// CodeUnknownHook: the daemon serves no hook of that name.
	CodeUnknownHook Code = "unknown_hook"
	// CodeNoLease: the daemon holds no lease of that id.
	CodeNoLease Code = "no_lease"
	// CodeExecuteFailed: an execute got no exit status.
	CodeExecuteFailed Code = "execute_failed"
	// CodeSyncFailed: a workspace sync's command in the pod failed (a
	// missing source, a full disk, a tar that does not extract).
	CodeSyncFailed Code = "sync_failed"
	// CodeInternal: any other failure.
	CodeInternal Code = "internal"
)

// The codes of the probe's diagnostics (besides the refusals above).
const (
	// CodeClusterUnreachable: the Kubernetes API did not answer.
	CodeClusterUnreachable Code = "cluster_unreachable"
	// CodePodRefused: the dry run of a lease pod was refused.
	CodePodRefused Code = "pod_refused"
	// CodePodAdmitted: the dry run of a lease pod was admitted.
	CodePodAdmitted Code = "pod_admitted"
	// CodeImageNoRegistry: a built-in image with no registry configured.
	CodeImageNoRegistry Code = "image_no_registry"
	// CodeImageUnreachable: the daemon cannot reach an image's registry.
	CodeImageUnreachable Code = "image_unreachable"
	// CodeImageUnverified: the registry wants the tenant's pull secrets.
	CodeImageUnverified Code = "image_unverified"
	// CodeImagePrefix starts the code of an image the registry does not
	// have ("image_" and imagecheck's status).
	CodeImagePrefix Code = "image_"
)

// UserError is a refusal whose message tells the user what to fix; its
// Code is a stable word for it.
type UserError struct {
	Code    Code
	Message string
}

// Error returns the message.
func (e *UserError) Error() string { return e.Message }

func userErrorf(code Code, format string, args ...any) error {
	return &UserError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// BadRequestError is a request's params that do not decode, or that Put
// and Get refuse, named by the field at fault ("params.<field>").
type BadRequestError struct {
	// Field is the JSON path of the field at fault ("lease.providerLeaseId"),
	// empty when the params are no JSON object at all.
	Field string
	Err   error
}

// Error says which field is wrong and how.
func (e *BadRequestError) Error() string {
	if e.Field == "" {
		return "params: " + e.Err.Error()
	}
	return "params." + e.Field + ": " + e.Err.Error()
}

// Unwrap returns the decode error.
func (e *BadRequestError) Unwrap() error { return e.Err }
