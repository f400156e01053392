package cm

import "github.com/ibcm/ibcm/cm/transport"

// daemonBackend, when set, makes NewManager's Manager through a daemon
// serving tr instead (ok), so that the package's examples and API property
// test run against both backends unchanged. Only the tests set it
// (export_test.go); it reports !ok for the transports its daemons use.
var daemonBackend func(tr transport.Transport, cfg ManagerConfig) (m *Manager, ok bool, err error)

func throughDaemon(tr transport.Transport, cfg ManagerConfig) (*Manager, bool, error) {
	if daemonBackend == nil {
		return nil, false, nil
	}
	return daemonBackend(tr, cfg)
}
