/** `kubectl driver-rollout --help`. */
export const HELP_TEXT = `kubectl driver-rollout: see and steer driver rollouts (DriverRollout objects).

Usage:
  kubectl driver-rollout status [ROLLOUT] [-w] [-o json|yaml]
      Per rollout a progress bar, then its nodes: pool, state, time in state, driver
      version, reason. -w redraws on every change until Ctrl-C.
  kubectl driver-rollout why NODE [--driver NAME]
      Why NODE is where it is: the coordinator's reason, the pods a drain would evict and
      the PodDisruptionBudgets covering them, and the node's recent Events.
  kubectl driver-rollout pause [ROLLOUT]     set upgradePolicy.autoUpgrade=false (nodes already
                                             upgrading finish; no new node starts)
  kubectl driver-rollout resume [ROLLOUT]    set upgradePolicy.autoUpgrade=true
  kubectl driver-rollout approve [ROLLOUT]   approve the canary of the revision the status names
                                             (annotations naming it and you, the user the API
                                             server authenticates); the other nodes then go on
  kubectl driver-rollout retry NODE          move a node in upgrade-failed back to upgrade-required
  kubectl driver-rollout skip NODE           label the node <domain>/<driver>-driver-upgrade.skip=true
  kubectl driver-rollout unskip NODE         remove that label

  ROLLOUT may be left out when the namespace has exactly one DriverRollout. Node commands
  (why, retry, skip, unskip) look at the DriverRollouts of every namespace unless -n names
  one; the driver is the one whose upgrade-state label the node carries, or --driver NAME.

Flags (as kubectl's):
  --kubeconfig PATH     kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)
  --context NAME        kubeconfig context (default: the current context)
  -n, --namespace NS    namespace of the DriverRollouts (status, pause, resume, approve default to the
                        context's namespace, else "default")
  -A, --all-namespaces  status: every namespace
  -o, --output FORMAT   status as json or yaml instead of a table
  -w, --watch           status: redraw on every change
  --width N             status, why: columns to fit (default: the terminal's, else $COLUMNS, else 80)
  -h, --help            this text

Exit status: 0 done, 1 the cluster refused or something was not found, 2 bad command line.
`;
