// Command karpenter-driver runs Karpenter's provisioning scheduler on one JSON problem and
// writes the NodeClaims it would create, as Karpenter's own scheduling benchmark
// (pkg/controllers/provisioning/scheduling/scheduling_benchmark_test.go) drives it: a fake
// cloud provider holding the given instance types, a controller-runtime fake client, the
// cluster state (empty, or holding the problem's existing nodes and running pods), one
// NodePool, Solve timed on its own.
//
//	karpenter-driver < problem.json > plan.json
//	karpenter-driver --echo < problem.json    # the problem as Karpenter's types hold it, for tests
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	fakecr "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/fake"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/operator/injection"
	"sigs.k8s.io/karpenter/pkg/operator/logging"
	"sigs.k8s.io/karpenter/pkg/operator/options"
	karpscheduling "sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/test"
)

// Version is the Karpenter release this driver is built against (go.mod pins it).
const Version = "v1.14.0"

// Offering is one place and way an instance type can be bought.
type Offering struct {
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
	Available    bool    `json:"available"`
}

// InstanceType is given with the allocatable the node will have: Karpenter sees it as its
// capacity, with no further overhead subtracted.
type InstanceType struct {
	Name         string     `json:"name"`
	Architecture string     `json:"architecture"`
	CPUMillis    int64      `json:"cpuMillis"`
	MemoryBytes  int64      `json:"memoryBytes"`
	Pods         int64      `json:"pods"`
	Offerings    []Offering `json:"offerings"`
}

// Node is a node already in the cluster: a Ready node of one of the instance types, not
// managed by the NodePool (as nodes another pool or a node group made).
type Node struct {
	Name         string `json:"name"`
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	CapacityType string `json:"capacityType"`
}

// Problem is the driver's input: the pods to place (Pods), and a cluster that may already run
// nodes (ExistingNodes) with pods bound to them (RunningPods, spec.nodeName set).
type Problem struct {
	NodePool      string         `json:"nodePool"`
	InstanceTypes []InstanceType `json:"instanceTypes"`
	Pods          []*corev1.Pod  `json:"pods"`
	DaemonSetPods []*corev1.Pod  `json:"daemonSetPods"`
	ExistingNodes []Node         `json:"existingNodes"`
	RunningPods   []*corev1.Pod  `json:"runningPods"`
	// The NodePool's own: on every node it launches (a dedicated pool's taint and label).
	Labels map[string]string `json:"labels"`
	Taints []corev1.Taint     `json:"taints"`
}

// Launch is the offering the cloud provider would launch for a NodeClaim: the cheapest
// available offering of its instance type options that meets its requirements, as
// CreateFleet's lowest-price strategy picks for on-demand.
type Launch struct {
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
}

// NodeClaim is one node Karpenter would create and the pods it planned for it.
type NodeClaim struct {
	InstanceTypeOptions int      `json:"instanceTypeOptions"`
	Zones               []string `json:"zones"` // the zones its requirements allow
	Launch              *Launch  `json:"launch"`
	Pods                []string `json:"pods"`
}

// Plan is the driver's output.
type Plan struct {
	Karpenter     string              `json:"karpenter"`
	SetupSeconds  float64             `json:"setupSeconds"`
	SolveSeconds  float64             `json:"solveSeconds"`
	NodeClaims    []NodeClaim         `json:"nodeClaims"`
	ExistingNodes map[string][]string `json:"existingNodes"` // node name -> the pods planned onto it
	PodErrors     map[string]string   `json:"podErrors"`
}

func instanceType(it InstanceType) *cloudprovider.InstanceType {
	offerings := make(cloudprovider.Offerings, 0, len(it.Offerings))
	zones, capacityTypes := map[string]bool{}, map[string]bool{}
	for _, o := range it.Offerings {
		offerings = append(offerings, &cloudprovider.Offering{
			Available: o.Available,
			Price:     o.Price,
			Requirements: karpscheduling.NewLabelRequirements(map[string]string{
				v1.CapacityTypeLabelKey:  o.CapacityType,
				corev1.LabelTopologyZone: o.Zone,
			}),
		})
		if o.Available {
			zones[o.Zone], capacityTypes[o.CapacityType] = true, true
		}
	}
	return &cloudprovider.InstanceType{
		Name: it.Name,
		Requirements: karpscheduling.NewRequirements(
			karpscheduling.NewRequirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, it.Name),
			karpscheduling.NewRequirement(corev1.LabelArchStable, corev1.NodeSelectorOpIn, it.Architecture),
			karpscheduling.NewRequirement(corev1.LabelOSStable, corev1.NodeSelectorOpIn, string(corev1.Linux)),
			karpscheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, keys(zones)...),
			karpscheduling.NewRequirement(v1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, keys(capacityTypes)...),
		),
		Offerings: offerings,
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(it.CPUMillis, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(it.MemoryBytes, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(it.Pods, resource.DecimalSI),
		},
		Overhead: &cloudprovider.InstanceTypeOverhead{},
	}
}

func keys(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func launch(nc *scheduling.NodeClaim) *Launch {
	var best *Launch
	for _, it := range nc.InstanceTypeOptions {
		o := it.Offerings.Available().Compatible(nc.Requirements).Cheapest()
		if o != nil && (best == nil || o.Price < best.Price) {
			best = &Launch{it.Name, o.Requirements.Get(corev1.LabelTopologyZone).Any(), o.Requirements.Get(v1.CapacityTypeLabelKey).Any(), o.Price}
		}
	}
	return best
}

// echo is the problem as the driver built it for Karpenter: each instance type's
// allocatable and offerings read back from Karpenter's own structures, and the pods decoded.
func echo(problem Problem) any {
	types := make([]InstanceType, 0, len(problem.InstanceTypes))
	for _, given := range problem.InstanceTypes {
		it := instanceType(given)
		allocatable := it.Allocatable()
		back := InstanceType{
			Name:         it.Name,
			Architecture: it.Requirements.Get(corev1.LabelArchStable).Any(),
			CPUMillis:    allocatable.Cpu().MilliValue(),
			MemoryBytes:  allocatable.Memory().Value(),
			Pods:         allocatable.Pods().Value(),
			Offerings:    []Offering{},
		}
		for _, o := range it.Offerings {
			back.Offerings = append(back.Offerings, Offering{o.Requirements.Get(corev1.LabelTopologyZone).Any(), o.Requirements.Get(v1.CapacityTypeLabelKey).Any(), o.Price, o.Available})
		}
		types = append(types, back)
	}
	return map[string]any{"instanceTypes": types, "pods": problem.Pods, "daemonSetPods": problem.DaemonSetPods}
}

// existing puts the problem's nodes and running pods into the API (a fake client) and
// Karpenter's cluster state, and returns the state's nodes, as the provisioner reads them.
func existing(ctx context.Context, client crclient.Client, cluster *state.Cluster, problem Problem) ([]*state.StateNode, error) {
	given := map[string]InstanceType{}
	for _, it := range problem.InstanceTypes {
		given[it.Name] = it
	}
	for _, n := range problem.ExistingNodes {
		it, ok := given[n.InstanceType]
		if !ok {
			return nil, fmt.Errorf("existing node %s: instance type %q is not among the problem's", n.Name, n.InstanceType)
		}
		resources := instanceType(it).Capacity
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{
				corev1.LabelInstanceTypeStable: n.InstanceType,
				corev1.LabelTopologyZone:       n.Zone,
				corev1.LabelArchStable:         it.Architecture,
				corev1.LabelOSStable:           string(corev1.Linux),
				corev1.LabelHostname:           n.Name,
				v1.CapacityTypeLabelKey:        n.CapacityType,
			}},
			Spec: corev1.NodeSpec{ProviderID: "fake:///" + n.Name},
			Status: corev1.NodeStatus{
				Capacity: resources, Allocatable: resources,
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			},
		}
		if err := client.Create(ctx, node); err != nil {
			return nil, fmt.Errorf("existing node %s: %w", n.Name, err)
		}
		if err := cluster.UpdateNode(ctx, node); err != nil {
			return nil, fmt.Errorf("existing node %s: %w", n.Name, err)
		}
	}
	for _, p := range problem.RunningPods {
		if err := client.Create(ctx, p); err != nil {
			return nil, fmt.Errorf("running pod %s: %w", key(p), err)
		}
		if err := cluster.UpdatePod(ctx, p); err != nil {
			return nil, fmt.Errorf("running pod %s: %w", key(p), err)
		}
	}
	return slices.Collect(cluster.Nodes()), nil
}

func key(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func solve(problem Problem) (Plan, error) {
	ctx := options.ToContext(injection.WithControllerName(context.Background(), "provisioner"), test.Options())
	opts := []scheduling.Options{scheduling.NumConcurrentReconciles(5)}
	started := time.Now()
	nodePool := test.NodePool(v1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: problem.NodePool},
		// No limits, as nodemanager's pool has none. (Karpenter's own benchmark sets 10M CPUs
		// and 10M GiB, which its worst-case accounting of in-flight NodeClaims, each at its
		// largest option, reaches with the full EC2 catalog's 24 TiB types; test.NodePool
		// sets 2,000 CPUs when given none, so an empty list is given.)
		Spec: v1.NodePoolSpec{Limits: v1.Limits{}, Template: v1.NodeClaimTemplate{
			ObjectMeta: v1.ObjectMeta{Labels: problem.Labels},
			Spec:       v1.NodeClaimTemplateSpec{Taints: problem.Taints},
		}},
	})
	types := make([]*cloudprovider.InstanceType, 0, len(problem.InstanceTypes))
	for _, it := range problem.InstanceTypes {
		types = append(types, instanceType(it))
	}
	provider := fake.NewCloudProvider()
	provider.InstanceTypes = types
	// the field indexes Karpenter's operator registers, which its cluster state lists by
	client := fakecr.NewClientBuilder().
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o crclient.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithIndex(&corev1.Node{}, "spec.providerID", func(o crclient.Object) []string { return []string{o.(*corev1.Node).Spec.ProviderID} }).
		Build()
	clk := &clock.RealClock{}
	cluster := state.NewCluster(clk, client, provider)
	stateNodes, err := existing(ctx, client, cluster, problem)
	if err != nil {
		return Plan{}, err
	}
	byPool := map[string][]*cloudprovider.InstanceType{nodePool.Name: types}
	topology, err := scheduling.NewTopology(ctx, client, cluster, stateNodes, []*v1.NodePool{nodePool}, byPool, problem.Pods, opts...)
	if err != nil {
		return Plan{}, fmt.Errorf("creating topology: %w", err)
	}
	scheduler := scheduling.NewScheduler(ctx, client, []*v1.NodePool{nodePool}, cluster, stateNodes, topology, byPool,
		problem.DaemonSetPods, events.NewRecorder(&record.FakeRecorder{}), clk, nil, nil, opts...)
	setup := time.Since(started)
	started = time.Now()
	results, err := scheduler.Solve(ctx, problem.Pods)
	solved := time.Since(started)
	if err != nil {
		return Plan{}, fmt.Errorf("solving: %w", err)
	}
	plan := Plan{Karpenter: Version, SetupSeconds: setup.Seconds(), SolveSeconds: solved.Seconds(), NodeClaims: []NodeClaim{}, ExistingNodes: map[string][]string{}, PodErrors: map[string]string{}}
	for _, node := range results.ExistingNodes {
		for _, p := range node.Pods {
			plan.ExistingNodes[node.Name()] = append(plan.ExistingNodes[node.Name()], key(p))
		}
	}
	for _, nc := range results.NewNodeClaims {
		zones := nc.Requirements.Get(corev1.LabelTopologyZone).Values()
		sort.Strings(zones)
		claim := NodeClaim{InstanceTypeOptions: len(nc.InstanceTypeOptions), Zones: zones, Launch: launch(nc), Pods: make([]string, 0, len(nc.Pods))}
		for _, p := range nc.Pods {
			claim.Pods = append(claim.Pods, key(p))
		}
		plan.NodeClaims = append(plan.NodeClaims, claim)
	}
	for p, e := range results.PodErrors {
		plan.PodErrors[key(p)] = e.Error()
	}
	return plan, nil
}

func main() {
	log.SetLogger(logging.NopLogger)
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "karpenter-driver: reading stdin:", err)
		os.Exit(2)
	}
	var problem Problem
	if err := json.Unmarshal(data, &problem); err != nil {
		fmt.Fprintln(os.Stderr, "karpenter-driver: the problem is not valid JSON:", err)
		os.Exit(2)
	}
	if problem.NodePool == "" {
		problem.NodePool = "default"
	}
	var out any
	if len(os.Args) > 1 && os.Args[1] == "--echo" {
		out = echo(problem)
	} else if out, err = solve(problem); err != nil {
		fmt.Fprintln(os.Stderr, "karpenter-driver:", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "karpenter-driver: writing the plan:", err)
		os.Exit(1)
	}
}
