// Package companystatus is the CompanyStatus kind (pcsync.io/v1alpha1):
// one object per company of a daemon's config, in the daemon's ApplySet
// namespace and named after the company, whose status says which config
// revision the daemon applied to the company's tenant, whether it is
// Ready and why not (kstatus conditions Ready, Reconciling, Stalled with
// observedGeneration), and whether the company is suspended
// (spec.suspend). Annotating one with AnnotationReconcileRequestedAt asks
// the daemon for a reconcile at once. Package statusctl, beside it, is the
// daemon's controller that writes them.
//
// Files:
//
//	types.go   the kind, its Go types, conditions, reasons, annotation and labels; the CRD (crd.yaml, embedded)
//	client.go  List, Get, RequestReconcile and WaitHandled for tools (pcsync get companies, pcsync reconcile)
package companystatus
