"""Produce rules shared by both protocols (HTTP and Kafka): each path calls them once."""
