// Package packaging holds how hookroom is installed, not Go code: the systemd unit
// (hookroom.service), the .deb's nfpm configuration (nfpm.yaml) and maintainer scripts (deb/),
// and nfpm's pinned build module (nfpm/). scripts/release.sh, the Dockerfile and compose.yaml
// at the top level use them.
//
// Its tests check all of that: the Dockerfile, compose.yaml and nfpm.yaml statically (under
// -short too), and, without -short, a real release build whose .deb is installed with dpkg,
// run, removed and purged.
package packaging
