// Package paperclip keeps Paperclip's side of the companies that opt in
// (Company spec.paperclip.manage): every agent a company declares exists in
// Paperclip with the pcsync adapter (adapterType pcsync, adapterConfig
// spoolDir and agent) and the fields it declares; a field edited by hand is
// put back; an agent removed from the config is paused, behind an accident
// guard.
//
// pcsync finds its agents by a marker it owns in their metadata (the key
// "pcsync": {"managedBy": "pcsync", "agent": <name>, ...}), never by name,
// and never touches an agent without it. Only declared fields are compared
// and written; a field pcsync declared before and no longer declares is
// reset (the marker lists them).
//
// The parts, one verb each: Client (Paperclip's HTTP API, context first,
// requests counted), Desire (the config → the agents wanted), Plan (wanted
// and live → the actions), Reconciler (plan, guard, execute) and Report
// (what was or would be done, as text, diff or JSON). ResolveAgent reads
// the marker the other way: which agent of the config a Paperclip agent id
// is (the sandbox gives a lease's pod that agent's scheduling).
package paperclip
