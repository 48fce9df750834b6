package images

// Version is pcsync's release version, kept here only: the tag of its
// images (make images' TAG), the tag render and the daemon give pcsync's
// images when the image pcsync runs from says none, the Helm chart's
// appVersion (charts/pcsync/Chart.yaml) and the release make release
// writes. Every build of a release has it, whatever it is stamped with
// (pcsync version prints the stamp beside it), so render's output is the
// same from go build, make build and an image. Raise it when a release is
// tagged, in the same commit as CHANGELOG.md's entry.
const Version = "v0.1.0"
