// kubenode: the parts of a single-node Kubernetes cluster the cluster tier starts, in one
// binary so that the packages they share are compiled and linked once: `kubenode NAME
// ARGS...` runs the API server, controller manager, scheduler, kubelet, kube-proxy,
// kubectl, or an etcd member, each exactly as its own command in k8s.io/kubernetes
// (cmd/*/*.go) and go.etcd.io/etcd (embed) would.
package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/embed"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllers "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kubenode apiserver|controller-manager|scheduler|kubelet|proxy|kubectl|etcd DIR ARGS...")
		os.Exit(2)
	}
	name := os.Args[1]
	os.Args = append([]string{"kubenode-" + name}, os.Args[2:]...)
	var command *cobra.Command
	switch name {
	case "apiserver":
		command = apiserver.NewAPIServerCommand()
	case "controller-manager":
		command = controllers.NewControllerManagerCommand()
	case "scheduler":
		command = scheduler.NewSchedulerCommand()
	case "kubelet":
		command = kubelet.NewKubeletCommand(context.Background())
	case "proxy":
		command = proxy.NewProxyCommand()
	case "kubectl":
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) // nolint:errcheck
		command = kubectl.NewDefaultKubectlCommand()
		if err := cli.RunNoErrOutput(command); err != nil {
			kubectlutil.CheckErr(err)
		}
		return
	case "etcd":
		os.Exit(etcd(os.Args[1:]))
	default:
		fmt.Fprintf(os.Stderr, "kubenode: unknown part %q\n", name)
		os.Exit(2)
	}
	os.Exit(cli.Run(command))
}

// etcd DIR CLIENT_URL PEER_URL: one member, its data in DIR, until SIGTERM.
func etcd(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: kubenode etcd DIR CLIENT_URL PEER_URL")
		return 2
	}
	cfg := embed.NewConfig()
	cfg.Dir = args[0]
	client, err := url.Parse(args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	peer, err := url.Parse(args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.InitialCluster = cfg.Name + "=" + args[2]
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer e.Close()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintln(os.Stderr, "etcd ready")
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	select {
	case <-stop:
		return 0
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
}
