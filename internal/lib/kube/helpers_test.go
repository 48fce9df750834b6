package kube

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

func metav1GetOptions() metav1.GetOptions       { return metav1.GetOptions{} }
func metav1DeleteOptions() metav1.DeleteOptions { return metav1.DeleteOptions{} }
