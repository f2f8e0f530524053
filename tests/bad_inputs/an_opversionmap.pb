

elementwise_add