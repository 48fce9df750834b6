// Package paperclipinstall puts pcsync's Paperclip adapter and sandbox
// plugin into the Paperclip server beside pcsync, without a credential:
//
//   - Install (install.go) copies both packages from pcsync's image
//     (images.PaperclipDir) into a directory the Paperclip container
//     mounts, and records the adapter in Paperclip's external-adapter store
//     (<PAPERCLIP_HOME>/adapter-plugins.json, store.go), which Paperclip
//     loads at start. The plugin is installed by Paperclip itself at start,
//     from the path its PAPERCLIP_KUBERNETES_PLUGIN_PATH names.
//   - Tracker (loaded.go) tells whether Paperclip did load them: each
//     package says hello to the daemon's sandbox socket when Paperclip
//     loads it, with its version, and the daemon's /readyz waits for both.
package paperclipinstall
